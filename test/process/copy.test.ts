import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { hashToken } from '../../src/auth/tokens.js';
import { loadConfig } from '../../src/config/config.js';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import { openStore } from '../../src/storage/open.js';
import type { Plant } from '../../src/plant.js';
import { SetDigest } from '../../src/transfer/digest.js';
import { exportPlants } from '../../src/transfer/export.js';
import { postgresDatabase, sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { Receiver } from '../helpers/receiver.js';
import { CLI, createToken, startServer } from '../helpers/process.js';
import { keepWriting, numberedPlants, plantstore, plantstoreAsync, postPlant, sqliteFile, storePlants } from '../helpers/transfer.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { newToken } from '../helpers/tokens.js';

stopPostgresAfterAll();

const SPECIAL: readonly Plant[] = [
  { id: INT64_MIN, name: 'smallest', tag: '' },
  { id: 9007199254740993n, name: 'Monstera 🌿 "quoted" \\ back', tag: 'aroid' },
  { id: INT64_MAX, name: '日本語', tag: null },
];
const PLANTS = SPECIAL.length + 12_000;

function exportOf(url: string): string {
  const result = plantstore(['export'], { DATABASE_URL: url });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
}

function webhooksOf(url: string): string {
  const result = plantstore(['webhook', 'list'], { DATABASE_URL: url });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
}

async function exportedWebhooks(url: string) {
  const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
  try {
    return await store.webhookSubscriptions.exportAll();
  } finally {
    await store.close();
  }
}

async function exportedTokens(url: string) {
  const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
  try {
    return await store.tokens.exportAll();
  } finally {
    await store.close();
  }
}

/**
 * Everything a target holds (plants as `plantstore export` writes them, tokens, webhook subscriptions), read
 * in-process: what a refused copy must leave as it was, read before and after without starting six CLI processes.
 */
async function contentOf(url: string) {
  const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
  try {
    let plants = '';
    await exportPlants(store.plants, {
      write: (text) => {
        plants += text;
        return Promise.resolve(true);
      },
    });
    return { plants, tokens: await store.tokens.exportAll(), webhooks: await store.webhookSubscriptions.exportAll() };
  } finally {
    await store.close();
  }
}

function tokensOf(url: string): string {
  const result = plantstore(['token', 'list'], { DATABASE_URL: url });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
}

async function plantCount(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM plants')).rows[0]?.n);
  } catch {
    return 0;
  } finally {
    await client.end();
  }
}

describe('plantstore copy', () => {
  let source: TestDatabase;
  let env: Record<string, string>;
  let alice: string;
  let bob: string;
  /** Read-only and expiring: the copy must keep both. */
  let carol: string;
  let receiver: Receiver;
  /** The signing secret of subscription "hook" before and after its rotation. */
  const secrets: string[] = [];
  const cleanups: Array<() => Promise<void>> = [];

  async function postgresTarget(): Promise<TestDatabase> {
    const db = await postgresDatabase();
    cleanups.push(() => db.cleanup());
    return db;
  }

  before(async () => {
    source = await sqliteDatabase();
    env = { DATABASE_URL: source.url };
    await storePlants(source.url, [...SPECIAL, ...numberedPlants(12_000, -6_000n)]);
    alice = createToken('alice', env);
    bob = createToken('bob', env);
    carol = createToken('carol', env, CLI, ['--read-only', '--expires-in', '90d']);
    assert.match(tokensOf(source.url), /^carol\t.*\tscopes plants:read\texpires 20\S+Z$/m);
    // alice has been used, so she has a last use to carry over.
    const server = await startServer(env);
    try {
      assert.equal((await postPlant(server.base, alice, '{"id":424242424242,"name":"made on SQLite"}')).status, 200);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
    assert.match(tokensOf(source.url), /^alice\tcreated \S+\tlast used 20/m);
    // Subscriptions after the plants, so the source holds no events: the copy must not make any either.
    receiver = await Receiver.start();
    const webhook = (args: string[]) => {
      const result = plantstore(['webhook', ...args], { ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
      assert.equal(result.status, 0, result.stderr);
      return result.stdout.trim();
    };
    secrets.push(webhook(['add', '--url', receiver.url(), '--name', 'hook']));
    secrets.push(webhook(['rotate-secret', 'hook']));
    webhook(['add', '--url', 'https://off.example/hook', '--name', 'off']);
    webhook(['disable', 'off']);
    assert.match(webhooksOf(source.url), /^off\thttps:\/\/off\.example\/hook\tdisabled since \S+: disabled by the operator\t/m);
  });
  after(async () => {
    await receiver?.close();
    for (const cleanup of cleanups.splice(0)) await cleanup();
    await source?.cleanup();
  });

  it('copies SQLite into PostgreSQL exactly and verifies it; a server on PostgreSQL accepts the tokens made on SQLite', async () => {
    const target = await postgresTarget();
    const result = plantstore(['copy', '--to', target.url], env);
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /^copy: from SQLite .*plants\.db to PostgreSQL postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/t_\w+\n/);
    assert.match(result.stderr, /^copy: tokens: 3 created; 3 on both sides, checksum [0-9a-f]{16} on both$/m);
    assert.match(result.stderr, /^copy: webhook subscriptions: 2 created; 2 on both sides, checksum [0-9a-f]{16} on both$/m);
    for (const secret of secrets) assert.ok(!result.stderr.includes(secret) && !result.stderr.includes(secret.slice(6)), 'no secret printed');
    assert.match(result.stderr, new RegExp(`^copy: plants: ${PLANTS + 1} created; ${PLANTS + 1} on both sides, checksum [0-9a-f]{16} on both$`, 'm'));
    assert.match(result.stderr, /^copy: verified: the target holds exactly what the source holds$/m);
    assert.equal(exportOf(target.url), exportOf(source.url));
    assert.equal(tokensOf(target.url), tokensOf(source.url), 'names, creation and last use times, scopes and expiry');
    // Names, URLs, state with its time and reason, creation times, and no events: copied plants are not new plants.
    assert.equal(webhooksOf(target.url), webhooksOf(source.url));
    assert.match(webhooksOf(target.url), /^hook\t.*\twaiting 0\tdelivered 0\t/m);
    // Each database numbers its events from its own sequence, so the copy gives its own id prefix: a webhook-id the
    // receiver had from the source never comes again from the target.
    const prefixes = async (url: string) => (await exportedWebhooks(url)).map((subscription) => subscription.idPrefix);
    const [sourcePrefixes, targetPrefixes] = [await prefixes(source.url), await prefixes(target.url)];
    assert.equal(targetPrefixes.length, 2);
    targetPrefixes.forEach((prefix, index) => assert.notEqual(prefix, sourcePrefixes[index]));

    const server = await startServer({ DATABASE_URL: target.url, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    try {
      for (const token of [alice, bob, carol]) {
        const read = await fetch(`${server.base}/plants/-9223372036854775808`, { headers: { authorization: `Bearer ${token}` } });
        assert.equal(read.status, 200);
        assert.equal(await read.text(), '{"id":-9223372036854775808,"name":"smallest","tag":""}');
      }
      assert.equal((await postPlant(server.base, alice, '{"id":424242424242,"name":"made on SQLite"}')).status, 200, 'a replay of a copied plant');
      assert.equal((await postPlant(server.base, bob, '{"id":7777777777777,"name":"made on PostgreSQL"}')).status, 200);
      // carol is still read-only there.
      const refused = await fetch(`${server.base}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${carol}`, 'content-type': 'application/json' },
        body: '{"id":7777777777778,"name":"not allowed"}',
      });
      assert.equal(refused.status, 403, await refused.text());
      assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="plantstore", error="insufficient_scope", scope="plants:create"');
      // The new plant alone reaches the receiver, signed by the secret made on SQLite and by the one before it,
      // whose grace was copied too.
      await receiver.waitFor((received) => received.length >= 1, 20_000, 'the new plant');
      const [delivery] = receiver.received;
      assert.ok(delivery);
      assert.match(delivery.body, /^\{"id":7777777777777,"name":"made on PostgreSQL"/);
      assert.match(String(delivery.headers['webhook-id']), new RegExp(`^msg_${targetPrefixes[0]}_`));
      for (const secret of secrets) {
        assert.doesNotThrow(() => new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>), 'signed with a copied secret');
      }
      assert.throws(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(delivery.body, delivery.headers as Record<string, string>));
      assert.equal((await postPlant(server.base, `plst_${randomBytes(32).toString('base64url')}`, '{"id":78,"name":"x"}')).status, 401);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });

  it('is idempotent: run again it creates nothing and verifies; interrupted, a second run finishes the job', async () => {
    const target = await postgresTarget();
    // Small batches, so the copy is still running when it is killed.
    const slowEnv = { ...env, WRITE_BATCH_LIMIT: '50' };
    const child = spawn(process.execPath, [CLI, 'copy', '--to', target.url], { env: { ...process.env, ...slowEnv }, stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    let copied = 0;
    while (copied === 0 && child.exitCode === null) {
      copied = await plantCount(target.url);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL', 'the copy was killed while it ran');
    const partly = await plantCount(target.url);
    assert.ok(partly > 0 && partly < PLANTS + 1, `${partly} plants copied when it was killed`);

    const resumed = plantstore(['copy', '--to', target.url], slowEnv);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stderr, /^copy: verified/m);
    assert.equal(exportOf(target.url), exportOf(source.url));
    assert.equal(tokensOf(target.url), tokensOf(source.url));

    const again = plantstore(['copy', '--to', target.url], env);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, /^copy: tokens: 0 created; 3 on both sides/m);
    assert.match(again.stderr, /^copy: webhook subscriptions: 0 created; 2 on both sides/m);
    assert.equal(webhooksOf(target.url), webhooksOf(source.url));
    assert.match(again.stderr, new RegExp(`^copy: plants: 0 created; ${PLANTS + 1} on both sides`, 'm'));
    assert.match(again.stderr, /^copy: verified/m);
  });

  it('refuses a target that holds different data, and writes nothing to it', async () => {
    const cases: Array<{ what: string; prepare: (url: string) => Promise<void>; problem: RegExp }> = [
      {
        what: 'a plant of the same id with another name',
        prepare: (url) => storePlants(url, [{ id: 9007199254740993n, name: 'not a Monstera', tag: 'aroid' }]),
        problem: /plant 9007199254740993, which differs from the source's/,
      },
      {
        what: 'a plant the source does not hold',
        prepare: (url) => storePlants(url, [{ id: -6_000n, name: 'plant -6000', tag: null }, { id: 10n ** 15n, name: 'stranger', tag: null }]),
        problem: /plant 1000000000000000, which the source does not hold/,
      },
      {
        what: 'a token of the same name with another hash',
        prepare: async (url) => {
          const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
          await store.tokens.add(newToken('alice', hashToken('someone else')));
          await store.close();
        },
        problem: /token "alice", which differs from the source's/,
      },
      {
        what: 'the same token but for its scopes',
        prepare: async (url) => {
          const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
          const carolThere = (await exportedTokens(source.url)).find((token) => token.name === 'carol');
          assert.ok(carolThere);
          await store.tokens.add({ ...carolThere, scopes: ['plants:read', 'plants:create'] });
          await store.close();
        },
        problem: /token "carol", which differs from the source's/,
      },
      {
        what: 'the same token but for its expiry',
        prepare: async (url) => {
          const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
          const carolThere = (await exportedTokens(source.url)).find((token) => token.name === 'carol');
          assert.ok(carolThere);
          await store.tokens.add({ ...carolThere, expiresAt: null });
          await store.close();
        },
        problem: /token "carol", which differs from the source's/,
      },
      {
        what: 'a webhook subscription of the same name with another secret',
        prepare: async (url) => {
          const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
          const [hook] = await exportedWebhooks(source.url);
          assert.equal(hook?.name, 'hook');
          await store.webhookSubscriptions.add({ ...hook, secret: `whsec_${randomBytes(32).toString('base64')}` });
          await store.close();
        },
        problem: /webhook subscription "hook", which differs from the source's/,
      },
      {
        what: 'a webhook subscription the source does not hold',
        prepare: (url) => {
          const result = plantstore(['webhook', 'add', '--url', 'https://stranger.example/hook'], { DATABASE_URL: url });
          assert.equal(result.status, 0, result.stderr);
          return Promise.resolve();
        },
        problem: /webhook subscription "stranger\.example", which the source does not hold/,
      },
    ];
    for (const { what, prepare, problem } of cases) {
      const target = await postgresTarget();
      await prepare(target.url);
      const before = await contentOf(target.url);
      const result = plantstore(['copy', '--to', target.url], env);
      assert.equal(result.status, 1, what);
      assert.match(result.stderr, /the target already holds different data: /, what);
      assert.match(result.stderr, problem, what);
      assert.deepEqual(await contentOf(target.url), before, `${what}: nothing written`);
    }
  });

  it('copies back from PostgreSQL into SQLite: the way back', async () => {
    const middle = await postgresTarget();
    assert.equal(plantstore(['copy', '--to', middle.url], env).status, 0);
    const back = await sqliteDatabase();
    cleanups.push(() => back.cleanup());
    const result = plantstore(['copy', '--to', back.url], { DATABASE_URL: middle.url });
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stderr, /^copy: from PostgreSQL .* to SQLite /);
    assert.match(result.stderr, /^copy: verified/m);
    assert.equal(exportOf(back.url), exportOf(source.url));
    assert.equal(tokensOf(back.url), tokensOf(source.url));
    assert.equal(webhooksOf(back.url), webhooksOf(source.url));
  });

  it('says NOT verified, exit 1, when the source changes while it runs; run again once writes stop, it verifies', async () => {
    const busy = await sqliteDatabase();
    cleanups.push(() => busy.cleanup());
    const busyEnv = { DATABASE_URL: busy.url };
    await storePlants(busy.url, numberedPlants(20_000));
    const token = createToken('writer', busyEnv);
    const target = await postgresTarget();
    const server = await startServer(busyEnv);
    try {
      const load = keepWriting(server.base, token, 4, 10n ** 12n);
      let result;
      try {
        result = await plantstoreAsync(['copy', '--to', target.url], busyEnv);
      } finally {
        await load.stop();
      }
      assert.equal(result.status, 1, result.stderr);
      assert.match(result.stderr, /^copy: plants: \d+ created; source \d+ \(checksum [0-9a-f]{16}\), target \d+ \(checksum [0-9a-f]{16}\)$/m);
      assert.match(result.stderr, /^copy: NOT verified: the two sides differ, so the source changed while the copy ran; stop writes to it and run the same copy again$/m);
    } finally {
      await server.stop();
    }
    const again = plantstore(['copy', '--to', target.url], busyEnv);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, /^copy: verified/m);
    assert.equal(exportOf(target.url), exportOf(busy.url));
  });

  it('needs --to naming another database, in a form DATABASE_URL takes', () => {
    const cases: Array<[string[], RegExp]> = [
      [['copy'], /copy needs --to URL/],
      [['copy', '--to', source.url], /names the database DATABASE_URL names/],
      [['copy', '--to', `sqlite:${path.relative(process.cwd(), sqliteFile(source.url))}`], /names the database DATABASE_URL names/],
      [['copy', '--to', 'mysql://x'], /copy --to: must start with sqlite:, postgres:\/\/ or postgresql:\/\//],
      [['copy', '--to', 'sqlite::memory:'], /copy --to: must name a SQLite file/],
    ];
    for (const [args, problem] of cases) {
      const result = plantstore(args, env);
      assert.equal(result.status, 2, args.join(' '));
      assert.match(result.stderr, problem);
    }
  });
});

describe('the copy checksum', () => {
  it('is the same for the same rows in any order, and differs when one row differs or is counted twice', () => {
    const rows = Array.from({ length: 100 }, (_, index) => `{"id":${index},"name":"p"}`);
    const digest = (list: readonly string[]) => {
      const result = new SetDigest();
      for (const row of list) result.add(row);
      return result;
    };
    const forward = digest(rows);
    assert.ok(forward.equals(digest([...rows].reverse())));
    assert.equal(forward.count, 100);
    assert.match(forward.checksum, /^[0-9a-f]{16}$/);
    assert.ok(!forward.equals(digest([...rows.slice(1), '{"id":0,"name":"q"}'])));
    // A row twice and another missing: the count agrees, the checksum does not (a XOR would cancel the pair out).
    assert.ok(!forward.equals(digest([...rows.slice(2), rows[2] as string, rows[2] as string])));
  });
});
