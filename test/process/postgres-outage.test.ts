import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { TestPostgres, createDatabase } from '../helpers/postgres.js';
import { createToken, errorRecordProblem, startServer, type ServerProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

/**
 * PostgreSQL goes away under load and comes back: the service answers 503 Error records promptly meanwhile
 * (never a 500, never a hang) to creates, reads and deletes alike, /readyz says so, it recovers by itself, and nothing
 * it answered 200 is lost. A database turned read-only refuses creates and deletes with 503 and still serves reads.
 * The database server is this test's own (embedded), even when TEST_DATABASE_URL names another: only a server
 * the test started can be stopped and started again.
 */

/** Longest an answer may take while the database is down (connections refused or terminated): prompt. */
const ANSWER_WITHIN_MS = 5000;
/**
 * Longest while it hangs: a statement already sent waits out the 10 s query timeout, and creates queued behind
 * it then wait up to the 2 s connect timeout for their own batch.
 */
const HUNG_ANSWER_WITHIN_MS = 15_000;

interface Sent {
  readonly id: bigint;
  readonly phase: Phase;
  readonly status: number;
  readonly problem: string | undefined;
  readonly elapsedMs: number;
}

type Phase = 'before' | 'outage' | 'after';

/** Between two checks of the server's state: each one is a request to it. */
const POLL_MS = 50;

async function readyStatus(base: string): Promise<number> {
  const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(HUNG_ANSWER_WITHIN_MS) });
  const body = await response.text();
  if (response.status !== 200) assert.equal(errorRecordProblem(response.status, response.headers.get('content-type') ?? undefined, body), undefined);
  return response.status;
}

interface Answered {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly body: string;
  /** Why the answer is not an Error record, when it is not 2xx; undefined when it is one. */
  readonly problem: string | undefined;
  readonly elapsedMs: number;
}

async function call(base: string, token: string, method: 'GET' | 'DELETE' | 'POST', path: string, body?: string): Promise<Answered> {
  const started = performance.now();
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body }),
    signal: AbortSignal.timeout(HUNG_ANSWER_WITHIN_MS + 5000),
  });
  const text = await response.text();
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: text,
    problem: response.status < 300 ? undefined : errorRecordProblem(response.status, response.headers.get('content-type') ?? undefined, text),
    elapsedMs: performance.now() - started,
  };
}

/** A 503 Error record with Retry-After, answered within `withinMs`. */
function assertUnavailable(answer: Answered, what: string, withinMs: number): void {
  assert.equal(answer.status, 503, `${what}: ${answer.status} ${answer.body}`);
  assert.equal(answer.problem, undefined, `${what}: ${answer.problem}`);
  assert.equal((JSON.parse(answer.body) as { message: string }).message, 'storage is unavailable; retry shortly', what);
  assert.match(String(answer.retryAfter), /^[1-9]\d*$/, `${what}: Retry-After ${answer.retryAfter}`);
  assert.ok(answer.elapsedMs < withinMs, `${what}: took ${Math.round(answer.elapsedMs)} ms`);
}

/** Plants of one tag, created before a failure so that reads and deletes have something to find during it. */
async function seedPlants(base: string, token: string, firstId: bigint, tag: string): Promise<bigint[]> {
  const ids = [firstId, firstId + 1n, firstId + 2n];
  for (const id of ids) {
    const answer = await call(base, token, 'POST', '/plants', `{"id":${id},"name":"seed ${id}","tag":"${tag}"}`);
    assert.equal(answer.status, 200, answer.body);
  }
  return ids;
}

/** Reads find exactly the seeded plants, by id and in their tag's list. */
async function assertReadable(base: string, token: string, ids: readonly bigint[], tag: string): Promise<void> {
  const one = await call(base, token, 'GET', `/plants/${ids[0]}`);
  assert.equal(one.status, 200, one.body);
  assert.equal(one.body, `{"id":${ids[0]},"name":"seed ${ids[0]}","tag":"${tag}"}`);
  const list = await call(base, token, 'GET', `/plants?tag=${tag}&limit=100`);
  assert.equal(list.status, 200, list.body);
  assert.deepEqual([...list.body.matchAll(/"id":(-?\d+)/g)].map((match) => BigInt(match[1] as string)), ids);
}

/** GET by id, GET by tag and DELETE of `deleteId`, all at once while the database cannot answer: each a 503. */
async function assertReadsAndDeletesUnavailable(
  base: string,
  token: string,
  ids: readonly bigint[],
  tag: string,
  deleteId: bigint,
  withinMs: number,
): Promise<number> {
  const [byId, byTag, deleted] = await Promise.all([
    call(base, token, 'GET', `/plants/${ids[0]}`),
    call(base, token, 'GET', `/plants?tag=${tag}`),
    call(base, token, 'DELETE', `/plants/${deleteId}`),
  ]);
  assertUnavailable(byId, 'GET /plants/{id}', withinMs);
  assertUnavailable(byTag, 'GET /plants?tag=', withinMs);
  assertUnavailable(deleted, 'DELETE /plants/{id}', withinMs);
  return Math.max(byId.elapsedMs, byTag.elapsedMs, deleted.elapsedMs);
}

/** Once the database is back: reads find the seeds (the refused delete removed nothing), and a delete works. */
async function assertReadsAndDeletesRecovered(base: string, token: string, ids: readonly bigint[], tag: string): Promise<void> {
  await assertReadable(base, token, ids, tag);
  assert.equal((await call(base, token, 'DELETE', `/plants/${ids[1]}`)).status, 204);
  assert.equal((await call(base, token, 'GET', `/plants/${ids[1]}`)).status, 404);
  await assertReadable(base, token, ids.filter((id) => id !== ids[1]), tag);
}

/** Creates sent by a few clients in a loop, each with a fresh id, until stop() is called. */
class Load {
  readonly sent: Sent[] = [];
  phase: Phase = 'before';
  #running = true;
  #nextId: bigint;
  readonly #workers: Array<Promise<void>>;

  constructor(
    private readonly base: string,
    private readonly token: string,
    firstId: bigint,
    clients: number,
  ) {
    this.#nextId = firstId;
    this.#workers = Array.from({ length: clients }, () => this.#work());
  }

  async create(id: bigint): Promise<Sent> {
    const phase = this.phase;
    const started = performance.now();
    const response = await fetch(`${this.base}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
      body: `{"id":${id},"name":"plant ${id}"}`,
      // A hang fails the test with an AbortError instead of stalling it.
      signal: AbortSignal.timeout(HUNG_ANSWER_WITHIN_MS + 5000),
    });
    const body = await response.text();
    const problem =
      response.status === 200
        ? body === `{"name":"plant ${id}"}`
          ? undefined
          : `200 with body ${body}`
        : errorRecordProblem(response.status, response.headers.get('content-type') ?? undefined, body);
    return { id, phase, status: response.status, problem, elapsedMs: performance.now() - started };
  }

  count(phase: Phase, status: number): number {
    return this.sent.filter((s) => s.phase === phase && s.status === status).length;
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#workers);
  }

  async #work(): Promise<void> {
    while (this.#running) {
      this.sent.push(await this.create(this.#nextId++));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
}

/**
 * What every outage must leave true: each answer a 200 with the Plant or a 503 Error record within `withinMs`,
 * every id answered 200 stored, and every id answered 503 created (or replayed) by a retry now.
 */
async function verify(load: Load, databaseUrl: string, withinMs: number): Promise<Sent[]> {
  for (const s of load.sent) {
    assert.ok(s.status === 200 || s.status === 503, `id ${s.id} (${s.phase}) answered ${s.status}`);
    assert.equal(s.problem, undefined, `id ${s.id} (${s.phase}) answered ${s.status}: ${s.problem}`);
    assert.ok(s.elapsedMs < withinMs, `id ${s.id} (${s.phase}) took ${Math.round(s.elapsedMs)} ms`);
  }
  const refused = load.sent.filter((s) => s.status === 503);
  assert.ok(refused.length > 0, 'no create was answered 503 during the outage');

  const store = await openStore(loadConfig({ DATABASE_URL: databaseUrl }).database);
  try {
    const stored = new Set<bigint>();
    let after: bigint | undefined;
    for (;;) {
      const page = await store.plants.list({ limit: 1000, ...(after === undefined ? {} : { after }) });
      for (const row of page) stored.add(row.id);
      if (page.length < 1000) break;
      after = page.at(-1)?.id;
    }
    const lost = load.sent.filter((s) => s.status === 200 && !stored.has(s.id)).map((s) => s.id);
    assert.deepEqual(lost, [], 'creates answered 200 are missing from the database');
  } finally {
    await store.close();
  }

  // A client that retries what got 503 now succeeds: created, or replayed if it had committed after all.
  const retried = await Promise.all(refused.slice(0, 200).map((s) => load.create(s.id)));
  assert.deepEqual(
    retried.filter((r) => r.status !== 200 || r.problem !== undefined).map((r) => `${r.id}: ${r.status} ${r.problem}`),
    [],
  );
  return refused;
}

describe('a PostgreSQL outage under load', () => {
  let postgres: TestPostgres;
  let databaseUrl: string;
  let server: ServerProcess;
  let token: string;

  before(async () => {
    postgres = await TestPostgres.start();
    databaseUrl = (await createDatabase(postgres.url())).url;
    // The load and the retries below open more connections at once than MAX_CONNECTIONS' default admits.
    const env = { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', MAX_CONNECTIONS: '1000' };
    token = createToken('outage', env);
    server = await startServer(env);
  });

  after(async () => {
    await server?.kill();
    await postgres?.stop();
  });

  it('answers 503 while the database is stopped, recovers by itself, and keeps every create answered 200', async (t) => {
    const seeded = await seedPlants(server.base, token, 9_000_000_000n, 'stopped');
    const load = new Load(server.base, token, 1n, 8);
    await waitFor('creates answered 200 before the outage', async () => load.count('before', 200) >= 50, { timeoutMs: 10_000, intervalMs: POLL_MS });

    // Fast shutdown: sessions in flight are terminated, then the server is gone (connections refused).
    load.phase = 'outage';
    await postgres.pause();
    const unreadyAfterMs = await waitFor('/readyz 503 during the outage', async () => (await readyStatus(server.base)) === 503, { timeoutMs: 5000, intervalMs: POLL_MS });
    await waitFor('creates answered 503 during the outage', async () => load.count('outage', 503) > 0, { timeoutMs: 5000, intervalMs: POLL_MS });
    // Reads and deletes need the database as much as creates do.
    // With the server gone the delete of a seed cannot have run, so afterwards the seed must still be there.
    const readsWaitedMs = await assertReadsAndDeletesUnavailable(server.base, token, seeded, 'stopped', seeded[1] as bigint, ANSWER_WITHIN_MS);
    // Stay down a while under load: every answer meanwhile must still come promptly.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(await readyStatus(server.base), 503);

    await postgres.resume();
    load.phase = 'after';
    const readyAfterMs = await waitFor('/readyz 200 once the database is back', async () => (await readyStatus(server.base)) === 200, { timeoutMs: 15_000, intervalMs: POLL_MS });
    await waitFor('creates answered 200 after recovery', async () => load.count('after', 200) >= 50, { timeoutMs: 15_000, intervalMs: POLL_MS });
    await load.stop();
    await assertReadsAndDeletesRecovered(server.base, token, seeded, 'stopped');

    assert.ok(!server.exited(), 'the server process survived the outage');
    const refused = await verify(load, databaseUrl, ANSWER_WITHIN_MS);
    const slowest = Math.max(...refused.map((s) => s.elapsedMs));
    t.diagnostic(
      `${load.sent.length} creates, ${refused.length} answered 503 (slowest ${Math.round(slowest)} ms); ` +
        `GET by id, GET by tag and DELETE 503 (slowest ${Math.round(readsWaitedMs)} ms); ` +
        `/readyz 503 ${Math.round(unreadyAfterMs)} ms after the stop, 200 again ${Math.round(readyAfterMs)} ms after the restart`,
    );
  });

  it('answers 503 within the timeouts while the database hangs without answering, then recovers', async (t) => {
    const seeded = await seedPlants(server.base, token, 9_100_000_000n, 'frozen');
    const load = new Load(server.base, token, 1_000_000n, 4);
    await waitFor('creates answered 200 before the hang', async () => load.count('before', 200) >= 20, { timeoutMs: 10_000, intervalMs: POLL_MS });

    // Frozen: connections open at the TCP level but nothing answers, so only the timeouts can end a wait.
    load.phase = 'outage';
    postgres.freeze();
    let readsWaitedMs: number;
    try {
      // Sent at once and awaited last: they wait out the same timeouts as the creates, side by side. The delete is of
      // an id never created: a statement sent to the frozen server may still run once it thaws (its 503 means
      // "outcome unknown", as for a create), so deleting a seed here would leave nothing definite to check after.
      const readsAndDeletes = assertReadsAndDeletesUnavailable(server.base, token, seeded, 'frozen', 9_100_000_099n, HUNG_ANSWER_WITHIN_MS);
      readsAndDeletes.catch(() => undefined);
      await waitFor('/readyz 503 during the hang', async () => (await readyStatus(server.base)) === 503, { timeoutMs: HUNG_ANSWER_WITHIN_MS, intervalMs: POLL_MS });
      await waitFor('creates answered 503 during the hang', async () => load.count('outage', 503) >= 4, { timeoutMs: HUNG_ANSWER_WITHIN_MS, intervalMs: POLL_MS });
      readsWaitedMs = await readsAndDeletes;
    } finally {
      postgres.thaw();
    }
    load.phase = 'after';
    await waitFor('/readyz 200 once the database answers again', async () => (await readyStatus(server.base)) === 200, { timeoutMs: 15_000, intervalMs: POLL_MS });
    await waitFor('creates answered 200 after the hang', async () => load.count('after', 200) >= 20, { timeoutMs: 15_000, intervalMs: POLL_MS });
    await load.stop();
    await assertReadsAndDeletesRecovered(server.base, token, seeded, 'frozen');

    assert.ok(!server.exited(), 'the server process survived the hang');
    const refused = await verify(load, databaseUrl, HUNG_ANSWER_WITHIN_MS);
    t.diagnostic(
      `${load.sent.length} creates, ${refused.length} answered 503 (slowest ${Math.round(Math.max(...refused.map((s) => s.elapsedMs)))} ms); ` +
        `GET by id, GET by tag and DELETE 503 (slowest ${Math.round(readsWaitedMs)} ms)`,
    );
  });

  it('answers creates and deletes 503 while the database is read-only, serves reads, and recovers once it is writable', async (t) => {
    const seeded = await seedPlants(server.base, token, 9_200_000_000n, 'readonly');
    const database = new URL(databaseUrl).pathname.slice(1);
    const admin = new pg.Client({ connectionString: postgres.url() });
    await admin.connect();
    // New sessions take the database's setting; the pool's open sessions are ended so that its next ones are new.
    const setReadOnly = async (on: boolean) => {
      await admin.query(`ALTER DATABASE ${database} SET default_transaction_read_only = ${on ? 'on' : 'off'}`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
    };
    try {
      await setReadOnly(true);
      const unreadyAfterMs = await waitFor('/readyz 503 while read-only', async () => (await readyStatus(server.base)) === 503, { timeoutMs: 5000, intervalMs: POLL_MS });
      // A few in a row: the first may meet a session ended above; later ones are refused by a read-only session.
      const refusedIds = [9_200_000_100n, 9_200_000_101n, 9_200_000_102n];
      for (const id of refusedIds) {
        assertUnavailable(await call(server.base, token, 'POST', '/plants', `{"id":${id},"name":"read-only ${id}"}`), `create ${id}`, ANSWER_WITHIN_MS);
      }
      assertUnavailable(await call(server.base, token, 'DELETE', `/plants/${seeded[1]}`), 'DELETE /plants/{id}', ANSWER_WITHIN_MS);
      // A read-only database still answers reads, so reads are 200: the creates above were refused by read-only
      // sessions, not by a pool with no working connection.
      await assertReadable(server.base, token, seeded, 'readonly');
      assert.equal(await readyStatus(server.base), 503);
      assert.equal((await fetch(`${server.base}/healthz`)).status, 200);
      assert.ok(!server.exited(), 'the server process stays up');

      await setReadOnly(false);
      const readyAfterMs = await waitFor('/readyz 200 once writable', async () => (await readyStatus(server.base)) === 200, { timeoutMs: 15_000, intervalMs: POLL_MS });
      // Nothing refused was stored, so each is created now, not replayed.
      for (const id of refusedIds) {
        assert.equal((await call(server.base, token, 'GET', `/plants/${id}`)).status, 404, `refused create ${id} was not stored`);
        const created = await call(server.base, token, 'POST', '/plants', `{"id":${id},"name":"read-only ${id}"}`);
        assert.equal(created.status, 200, created.body);
      }
      await assertReadsAndDeletesRecovered(server.base, token, seeded, 'readonly');
      t.diagnostic(
        `read-only database: /readyz 503 ${Math.round(unreadyAfterMs)} ms after the switch, creates and a delete 503, reads 200; ` +
          `/readyz 200 again ${Math.round(readyAfterMs)} ms after it was writable again`,
      );
    } finally {
      await admin.query(`ALTER DATABASE ${database} RESET default_transaction_read_only`).catch(() => undefined);
      await admin.end();
    }
  });
});
