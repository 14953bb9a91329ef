/**
 * Crashes lose nothing acknowledged: the server runs as a real child process under concurrent load, is killed
 * with SIGKILL at a random moment, restarted on the same database, and every create that was answered 200 must
 * be stored with exactly the name and tag sent. SIGTERM instead: requests in flight are answered, their writes
 * kept, and the process exits 0. Each runs with one thread (WORKERS=1) and with worker threads (WORKERS=2), whose
 * SIGKILL must also leave nothing behind holding the port or the database.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import fs from 'node:fs';
import { createServer } from 'node:net';
import pg from 'pg';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import type { Plant } from '../../src/plant.js';
import { DATABASES } from '../helpers/databases.js';
import { halfSentCreate } from '../helpers/half-sent-create.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

stopPostgresAfterAll();

const CLIENTS = 32;
/** SIGKILL and SIGTERM rounds for each WORKERS value. */
const ROUNDS: ReadonlyArray<{ readonly workers: number; readonly kill: number; readonly term: number }> = [
  { workers: 1, kill: 5, term: 2 },
  { workers: 2, kill: 3, term: 2 },
];
/** How soon after a SIGKILL the port and the database must be free: a supervisor restarts within seconds. */
const RELEASED_WITHIN_MS = 3000;

interface Sent {
  readonly name: string;
  readonly tag: string | null;
}

/** Characters from several scripts, quotes, backslashes and astral code points; never NUL or a lone surrogate. */
const ALPHABET = [...'abcXYZ 019-_.\'"\\/{}[]:,éßøΩжξ中文字🌱🌵🪴\u00a0\u2028\t'];

function randomText(min: number, max: number): string {
  const length = randomInt(min, max + 1);
  let text = '';
  for (let i = 0; i < length; i += 1) text += ALPHABET[randomInt(ALPHABET.length)];
  return text;
}

/** A random int64, across the whole range. */
function randomId(): bigint {
  return randomBytes(8).readBigInt64BE();
}

function body(id: bigint, plant: Sent): string {
  const tag = plant.tag === null ? '' : `,"tag":${JSON.stringify(plant.tag)}`;
  return `{"id":${id},"name":${JSON.stringify(plant.name)}${tag}}`;
}

interface LoadResult {
  /** Every create answered 200, with what was sent. */
  readonly acknowledged: Map<bigint, Sent>;
  readonly sent: number;
  readonly failed: number;
  readonly statuses: Map<number, number>;
}

/**
 * `clients` loops, each posting distinct random plants one after another until `stop()` is called or the server
 * stops answering. Ids are unique across the whole test (`used`).
 */
function load(server: ServerProcess, token: string, used: Set<bigint>, clients = CLIENTS) {
  const acknowledged = new Map<bigint, Sent>();
  const statuses = new Map<number, number>();
  let sent = 0;
  let failed = 0;
  let stopped = false;
  const client = async () => {
    while (!stopped) {
      let id = randomId();
      while (used.has(id)) id = randomId();
      used.add(id);
      const plant: Sent = { name: randomText(1, 40), tag: randomInt(4) === 0 ? null : randomText(0, 20) };
      sent += 1;
      let status: number;
      let text: string;
      try {
        const response = await fetch(`${server.base}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: body(id, plant),
          signal: AbortSignal.timeout(30_000),
        });
        text = await response.text();
        status = response.status;
      } catch {
        // The server is gone (killed, or closed its listener): this create was not acknowledged.
        failed += 1;
        if (server.exited()) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
        continue;
      }
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (status === 200) {
        // Outside the try: a complete 200 whose body is not what was sent is a wrong answer and fails the test;
        // only a request that got no complete answer counts as cut off by the kill.
        assert.deepEqual(JSON.parse(text), plant.tag === null ? { name: plant.name } : { name: plant.name, tag: plant.tag }, `200 for ${id}`);
        acknowledged.set(id, plant);
      }
    }
  };
  const done = Promise.all(Array.from({ length: clients }, client));
  // A wrong answer rejects `done` while the test still waits elsewhere; handled here so stop() can rethrow it.
  done.catch(() => undefined);
  return {
    /** Stops the clients and waits for each one's last request to settle. */
    async stop(): Promise<LoadResult> {
      stopped = true;
      await done;
      return { acknowledged, sent, failed, statuses };
    },
    acknowledgedSoFar: () => acknowledged.size,
  };
}

/** Reads every acknowledged id back through the store, with the server stopped, and compares exactly. */
async function assertStored(url: string, expected: ReadonlyMap<bigint, Sent>): Promise<void> {
  const store = await openStore(loadConfig({ DATABASE_URL: url }).database);
  try {
    const stored = new Map<bigint, Plant>();
    let after: bigint | undefined;
    for (;;) {
      const page = await store.plants.list({ limit: 5000, ...(after === undefined ? {} : { after }) });
      for (const plant of page) stored.set(plant.id, plant);
      if (page.length < 5000) break;
      after = page.at(-1)?.id;
    }
    const lost: string[] = [];
    for (const [id, sent] of expected) {
      const plant = stored.get(id);
      if (!plant) lost.push(`${id} missing`);
      else if (plant.name !== sent.name || plant.tag !== sent.tag) {
        lost.push(`${id} stored as ${JSON.stringify(plant)} but sent ${JSON.stringify(sent)}`);
      }
    }
    assert.deepEqual(lost.slice(0, 10), [], `${lost.length} of ${expected.size} acknowledged creates are not stored as sent`);
    // Spot-check the single-row read path too, with its exact bigint id.
    const sample = [...expected.keys()].slice(0, 50);
    for (const id of sample) assert.equal((await store.plants.get(id))?.id, id);
  } finally {
    await store.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether a socket can listen on `port` alone (no SO_REUSEPORT): nothing else holds it. */
async function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port, host: '127.0.0.1' }, resolve);
    });
    return true;
  } catch {
    return false;
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Processes holding the SQLite file, its -wal or its -shm open: every fd of every process /proc shows us. */
function sqliteHolders(file: string): number[] {
  const names = new Set([file, `${file}-wal`, `${file}-shm`]);
  const holders: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    let fds: string[];
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (names.has(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))) {
          holders.push(Number(pid));
          break;
        }
      } catch {
        // gone meanwhile
      }
    }
  }
  return holders;
}

/** Sessions on the PostgreSQL database other than the one asking. */
async function postgresSessions(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query<{ count: string }>(
      "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
    );
    return Number(result.rows[0]?.count);
  } finally {
    await client.end();
  }
}

for (const { kind, create } of DATABASES) for (const { workers, kill: KILL_ROUNDS, term: TERM_ROUNDS } of ROUNDS) {
  describe(`crash safety on ${kind}, WORKERS=${workers}`, { timeout: 240_000 }, () => {
    it(`keeps every acknowledged create through ${KILL_ROUNDS} SIGKILLs at random moments under load`, async (t) => {
      // A store that cannot start fails the test: nothing is skipped.
      const db = await create();
      const servers: ServerProcess[] = [];
      try {
        const env = { DATABASE_URL: db.url, WORKERS: String(workers) };
        const token = createToken('crash', env);
        const used = new Set<bigint>();
        const everAcknowledged = new Map<bigint, Sent>();
        let sentTotal = 0;
        for (let round = 1; round <= KILL_ROUNDS; round += 1) {
          const server = await startServer(env);
          servers.push(server);
          const clients = load(server, token, used);
          // Let some creates be acknowledged, then kill at a random moment in the stream.
          await waitFor('the first acknowledged creates', () => clients.acknowledgedSoFar() >= 20, { timeoutMs: 60_000 });
          await sleep(randomInt(50, 1200));
          const exit = await server.stop('SIGKILL');
          assert.equal(exit.signal, 'SIGKILL');
          const killedAt = performance.now();
          // Nothing of the killed server (no thread, no child) holds the port or the database: a supervisor's restart
          // would otherwise fail to listen, or share the file with a ghost.
          await waitFor('the port to be free', () => portIsFree(server.port), { timeoutMs: RELEASED_WITHIN_MS, intervalMs: 50 });
          const file = loadConfig({ DATABASE_URL: db.url }).database;
          if (file.kind === 'sqlite') assert.deepEqual(sqliteHolders(file.path), [], 'no process holds the database open');
          else await waitFor('its PostgreSQL sessions to end', async () => (await postgresSessions(db.url)) === 0, { timeoutMs: RELEASED_WITHIN_MS, intervalMs: 100 });
          const releasedMs = Math.round(performance.now() - killedAt);
          const result = await clients.stop();
          assert.deepEqual(
            [...result.statuses.keys()].filter((status) => status !== 200),
            [],
            `every answer under load is 200: ${JSON.stringify([...result.statuses])}`,
          );
          for (const [id, plant] of result.acknowledged) everAcknowledged.set(id, plant);
          sentTotal += result.sent;
          // Every round checks everything acknowledged so far: earlier rounds' writes must survive later crashes.
          await assertStored(db.url, everAcknowledged);
          t.diagnostic(
            `${kind} WORKERS=${workers} SIGKILL round ${round}: ${result.sent} creates sent, ${result.acknowledged.size} acknowledged, ` +
              `${result.failed} cut off by the kill; port and database released ${releasedMs} ms after it; ${everAcknowledged.size} acknowledged so far, all stored`,
          );
        }
        // And the last restart serves on the recovered database.
        const server = await startServer(env);
        servers.push(server);
        const [someId, somePlant] = [...everAcknowledged][0] as [bigint, Sent];
        const replay = await fetch(`${server.base}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: body(someId, somePlant),
        });
        assert.equal(replay.status, 200, 'an acknowledged create replays as identical after the crashes');
        assert.equal((await server.stop('SIGTERM')).code, 0);
        t.diagnostic(
          `${kind} WORKERS=${workers} FIGURES: ${KILL_ROUNDS} SIGKILL rounds survived; ${everAcknowledged.size} acknowledged creates of ${sentTotal} sent, 0 lost`,
        );
      } finally {
        for (const server of servers) await server.kill();
        await db.cleanup();
      }
    });

    it('on SIGTERM answers requests in flight, keeps their writes, and exits 0', async (t) => {
      // A store that cannot start fails the test: nothing is skipped.
      const db = await create();
      const servers: ServerProcess[] = [];
      try {
        const env = { DATABASE_URL: db.url, WORKERS: String(workers) };
        const token = createToken('term', env);
        const used = new Set<bigint>();
        const everAcknowledged = new Map<bigint, Sent>();
        for (let round = 1; round <= TERM_ROUNDS; round += 1) {
          const server = await startServer(env);
          servers.push(server);
          // Requests certainly in flight at the signal: headers read (100 Continue), half the body still to come.
          const inFlight = await Promise.all(
            Array.from({ length: 8 }, async () => {
              let id = randomId();
              while (used.has(id)) id = randomId();
              used.add(id);
              const plant: Sent = { name: randomText(1, 40), tag: randomInt(2) === 0 ? null : randomText(0, 20) };
              return { id, plant, request: await halfSentCreate(server.port, token, body(id, plant)) };
            }),
          );
          const clients = load(server, token, used);
          await waitFor('the first acknowledged creates', () => clients.acknowledgedSoFar() >= 20, { timeoutMs: 60_000 });
          await sleep(randomInt(50, 800));
          const exit = server.stop('SIGTERM');
          // The listener closes at once; the half-sent requests are finished after the signal.
          await sleep(300);
          for (const { id, plant, request } of inFlight) {
            const answer = await request.finish();
            if (answer.status !== 200) await exit;
            assert.equal(
              answer.status,
              200,
              `in-flight create ${id} answered after SIGTERM: ${answer.body}; server output: ${JSON.stringify(server.output())}`,
            );
            everAcknowledged.set(id, plant);
          }
          const { code, signal } = await exit;
          assert.equal(signal, null);
          assert.equal(code, 0, `exit code after SIGTERM; stderr: ${server.output().stderr}`);
          const result = await clients.stop();
          assert.deepEqual(
            [...result.statuses.keys()].filter((status) => status !== 200),
            [],
            `every answer during shutdown is 200: ${JSON.stringify([...result.statuses])}`,
          );
          for (const [id, plant] of result.acknowledged) everAcknowledged.set(id, plant);
          await assertStored(db.url, everAcknowledged);
          t.diagnostic(
            `${kind} WORKERS=${workers} SIGTERM round ${round}: ${inFlight.length} half-sent requests answered 200 after the signal; ` +
              `${result.acknowledged.size} of ${result.sent} load creates acknowledged; exit 0; all stored`,
          );
        }
      } finally {
        for (const server of servers) await server.kill();
        await db.cleanup();
      }
    });
  });
}
