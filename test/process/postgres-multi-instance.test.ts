import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { POSTGRES_SCHEMA_VERSION } from '../../src/storage/postgres/migrations.js';
import type { Store } from '../../src/storage/store.js';
import { postgresDatabase, type TestDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { createToken, errorRecordProblem, runCli, startServer, type ServerProcess } from '../helpers/process.js';
import { newToken } from '../helpers/tokens.js';

stopPostgresAfterAll();

/**
 * Several stateless instances on one PostgreSQL: two real `plantstore serve` processes share a database, and
 * uniqueness, replays, conflicts and revocation hold across them because the database decides them.
 */

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly contentType: string | null;
}

async function post(base: string, token: string, body: string): Promise<Answer> {
  const response = await fetch(`${base}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
    signal: AbortSignal.timeout(20_000),
  });
  return { status: response.status, body: await response.text(), contentType: response.headers.get('content-type') };
}

describe('plantstore migrate, run alone on a fresh PostgreSQL database', () => {
  it('creates the schema at the current version: every version recorded, plants keyed by a bigint id', async () => {
    const db = await postgresDatabase();
    try {
      const { stderr } = runCli(['migrate'], { DATABASE_URL: db.url, LOG_LEVEL: 'warn' });
      assert.match(stderr, /database schema is up to date/);
      // Read behind the service's back, before any other command has opened the database.
      const client = new pg.Client(db.url);
      await client.connect();
      try {
        const versions = await client.query<{ version: number }>('SELECT version FROM plantstore_schema ORDER BY version');
        assert.deepEqual(
          versions.rows.map((row) => row.version),
          Array.from({ length: POSTGRES_SCHEMA_VERSION }, (_, index) => index + 1),
        );
        const key = await client.query<{ column_name: string; data_type: string }>(
          `SELECT a.attname AS column_name, format_type(a.atttypid, a.atttypmod) AS data_type
           FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
           WHERE i.indrelid = 'plants'::regclass AND i.indisprimary`,
        );
        assert.deepEqual(key.rows, [{ column_name: 'id', data_type: 'bigint' }]);
        const tables = await client.query<{ tokens: string | null; heartbeat: string | null; plants: string }>(
          "SELECT to_regclass('tokens')::text AS tokens, to_regclass('plantstore_heartbeat')::text AS heartbeat, (SELECT count(*) FROM plants)::text AS plants",
        );
        assert.deepEqual(tables.rows[0], { tokens: 'tokens', heartbeat: 'plantstore_heartbeat', plants: '0' });
      } finally {
        await client.end();
      }
    } finally {
      await db.cleanup();
    }
  });
});

describe('two plantstore processes on one PostgreSQL database', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let token: string;
  let servers: ServerProcess[] = [];
  let store: Store;

  before(async () => {
    db = await postgresDatabase();
    // The races below send 200 requests at once to each process, each on a connection of its own: more than
    // MAX_CONNECTIONS' default, which would close the rest as they are accepted (test/process/instance-bounds.test.ts).
    env = { DATABASE_URL: db.url, LOG_LEVEL: 'warn', MAX_CONNECTIONS: '1000' };
    runCli(['migrate'], env);
    token = createToken('x', env);
    // Started together: both migrate (a no-op now) under the advisory lock and serve the same data.
    servers = await Promise.all([startServer(env), startServer(env)]);
    store = await openStore(loadConfig(env).database);
  });

  after(async () => {
    await Promise.all(servers.map((server) => server.kill()));
    await store?.close();
    await db?.cleanup();
  });

  it('answers 200 to every concurrent create of the same ids with the same content, through both', async () => {
    const ids = Array.from({ length: 100 }, (_, index) => 9_000_000_000_000_000_000n + BigInt(index));
    const sends = ids.flatMap((id) =>
      [0, 1, 0, 1].map((server) => ({ id, server: servers[server] as ServerProcess, body: `{"id":${id},"name":"same ${id}","tag":"t"}` })),
    );
    const answers = await Promise.all(sends.map(({ server, body }) => post(server.base, token, body)));
    answers.forEach((answer, index) => {
      const { id } = sends[index] as { id: bigint };
      assert.equal(answer.status, 200, answer.body);
      assert.deepEqual(JSON.parse(answer.body), { name: `same ${id}`, tag: 't' });
    });
    for (const id of ids) assert.deepEqual(await store.plants.get(id), { id, name: `same ${id}`, tag: 't' });
  });

  it('lets exactly one of several different creates of one id win across both; the rest get 409', async () => {
    const ids = Array.from({ length: 100 }, (_, index) => -9_000_000_000_000_000_000n - BigInt(index));
    // Four different contents per id, two through each process, all at once.
    const sends = ids.flatMap((id, index) =>
      [0, 1, 2, 3].map((variant) => ({
        id,
        server: servers[(variant + index) % 2] as ServerProcess,
        name: `variant ${variant} of ${id}`,
      })),
    );
    const answers = await Promise.all(sends.map(({ id, server, name }) => post(server.base, token, `{"id":${id},"name":${JSON.stringify(name)}}`)));
    const winners = new Map<bigint, string[]>();
    answers.forEach((answer, index) => {
      const { id, name } = sends[index] as (typeof sends)[number];
      if (answer.status === 200) {
        assert.deepEqual(JSON.parse(answer.body), { name });
        winners.set(id, [...(winners.get(id) ?? []), name]);
      } else {
        assert.equal(answer.status, 409, answer.body);
        assert.equal(errorRecordProblem(409, answer.contentType ?? undefined, answer.body), undefined);
      }
    });
    for (const id of ids) {
      const won = winners.get(id) ?? [];
      assert.equal(won.length, 1, `id ${id} was answered 200 ${won.length} times`);
      // What was answered 200 is what is stored.
      assert.deepEqual(await store.plants.get(id), { id, name: won[0], tag: null });
    }
  });

  it('refuses a token revoked through the CLI on both processes within 2.5 s', async () => {
    const revoked = createToken('to-revoke', env);
    for (const server of servers) {
      const answer = await post(server.base, revoked, `{"id":${Date.now()}${servers.indexOf(server)},"name":"before"}`);
      assert.equal(answer.status, 200, answer.body);
    }
    runCli(['token', 'revoke', 'to-revoke'], env);
    const revokedAt = performance.now();
    const refusedAfter = await Promise.all(
      servers.map(async (server) => {
        for (;;) {
          const response = await fetch(`${server.base}/plants`, {
            method: 'POST',
            headers: { authorization: `Bearer ${revoked}`, 'content-type': 'application/json' },
            body: '{"id":1,"name":"after"}',
          });
          const body = await response.text();
          if (response.status === 401) {
            assert.match(String(response.headers.get('www-authenticate')), /error="invalid_token"/);
            assert.equal(errorRecordProblem(401, response.headers.get('content-type') ?? undefined, body), undefined);
            return performance.now() - revokedAt;
          }
          assert.ok([200, 409].includes(response.status), body);
          assert.ok(performance.now() - revokedAt < 2500, 'still accepted 2.5 s after revocation');
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }),
    );
    assert.ok(refusedAfter.every((ms) => ms < 2500), `refused after ${refusedAfter.map(Math.round).join(' and ')} ms`);
    // The other token is unaffected.
    for (const server of servers) assert.notEqual((await post(server.base, token, '{"id":1,"name":"after"}')).status, 401);
  });

  it('holds a token to its scopes on both processes, and refuses it on both from its expiry, within TOKEN_CACHE_MS', async () => {
    // Made after both started, with an expiry a few seconds out (token create takes a minute at least): each
    // process learns of it from the database, on its first use there.
    const limited = generateToken();
    const expiresAt = Date.now() + 3000;
    await store.tokens.add(newToken('limited', hashToken(limited), { scopes: ['plants:read'], expiresAt: new Date(expiresAt) }));
    for (const server of servers) {
      const read = await fetch(`${server.base}/plants?limit=1`, { headers: { authorization: `Bearer ${limited}` } });
      assert.equal(read.status, 200, await read.text());
      const refused = await post(server.base, limited, '{"id":5,"name":"not allowed"}');
      assert.equal(refused.status, 403, refused.body);
      assert.deepEqual(JSON.parse(refused.body), { error: 403, message: 'this token may not create plants: it lacks the plants:create scope' });
    }
    const refusedAt = await Promise.all(
      servers.map(async (server) => {
        for (;;) {
          const response = await fetch(`${server.base}/plants?limit=1`, { headers: { authorization: `Bearer ${limited}` } });
          const body = await response.text();
          if (response.status === 401) {
            assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="plantstore", error="invalid_token", error_description="the token has expired"');
            assert.deepEqual(JSON.parse(body), { error: 401, message: 'the token has expired' });
            return Date.now();
          }
          assert.equal(response.status, 200, body);
          assert.ok(Date.now() < expiresAt + 1000, 'still accepted a second after its expiry');
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }),
    );
    // TOKEN_CACHE_MS is 1000 by default: refused from the expiry on, never before it and never later than that.
    for (const at of refusedAt) assert.ok(at >= expiresAt && at < expiresAt + 1000, `refused ${at - expiresAt} ms after the expiry`);
  });
});
