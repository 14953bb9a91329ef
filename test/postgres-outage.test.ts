import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../src/config.js';
import { openStore } from '../src/storage/open.js';
import { TestPostgres, createDatabase } from './helpers/postgres.js';
import { createToken, errorRecordProblem, startServer, type ServerProcess } from './helpers/process.js';

/**
 * PostgreSQL goes away under load and comes back: the service answers 503 Error records promptly meanwhile
 * (never a 500, never a hang), /readyz says so, it recovers by itself, and nothing it answered 200 is lost.
 * The database server is this test's own (embedded), even when TEST_DATABASE_URL names another: only a server
 * the test started can be stopped and started again.
 */

/** Longest an answer may take while the database is down: connect timeout 2 s, statement timeout 10 s. */
const ANSWER_WITHIN_MS = 12_000;

interface Sent {
  readonly id: bigint;
  readonly phase: Phase;
  readonly status: number;
  readonly problem: string | undefined;
  readonly elapsedMs: number;
}

type Phase = 'before' | 'outage' | 'after';

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  for (;;) {
    if (await check()) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function readyStatus(base: string): Promise<number> {
  const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
  const body = await response.text();
  if (response.status !== 200) assert.equal(errorRecordProblem(response.status, response.headers.get('content-type') ?? undefined, body), undefined);
  return response.status;
}

describe('a PostgreSQL outage under load', () => {
  let postgres: TestPostgres;
  let databaseUrl: string;
  let server: ServerProcess;
  let token: string;

  before(async () => {
    postgres = await TestPostgres.start();
    databaseUrl = (await createDatabase(postgres.url())).url;
    const env = { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' };
    token = createToken('outage', env);
    server = await startServer(env);
  });

  after(async () => {
    await server?.kill();
    await postgres?.stop();
  });

  it('answers 503 while the database is down, recovers by itself, and keeps every create answered 200', async (t) => {
    let phase: Phase = 'before';
    let running = true;
    let nextId = 1n;
    const sent: Sent[] = [];

    const create = async (id: bigint): Promise<Sent> => {
      const at = phase;
      const started = performance.now();
      const response = await fetch(`${server.base}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: `{"id":${id},"name":"plant ${id}"}`,
        // A hang fails the test with an AbortError instead of stalling it.
        signal: AbortSignal.timeout(ANSWER_WITHIN_MS + 3000),
      });
      const body = await response.text();
      const problem =
        response.status === 200
          ? body === `{"name":"plant ${id}"}`
            ? undefined
            : `200 with body ${body}`
          : errorRecordProblem(response.status, response.headers.get('content-type') ?? undefined, body);
      return { id, phase: at, status: response.status, problem, elapsedMs: performance.now() - started };
    };

    const worker = async () => {
      while (running) {
        sent.push(await create(nextId++));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    };
    const workers = Array.from({ length: 8 }, worker);

    await waitFor('creates answered 200 before the outage', 10_000, async () => sent.filter((s) => s.status === 200).length >= 50);

    // Fast shutdown: sessions in flight are terminated, then the server is gone (connections refused).
    phase = 'outage';
    await postgres.pause();
    const unreadyAfterMs = await waitFor('/readyz 503 during the outage', 5000, async () => (await readyStatus(server.base)) === 503);
    await waitFor('creates answered 503 during the outage', 5000, async () =>
      sent.some((s) => s.phase === 'outage' && s.status === 503),
    );
    // Stay down a while under load: every answer meanwhile must still come promptly.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(await readyStatus(server.base), 503);

    await postgres.resume();
    phase = 'after';
    const readyAfterMs = await waitFor('/readyz 200 once the database is back', 15_000, async () => (await readyStatus(server.base)) === 200);
    await waitFor('creates answered 200 after recovery', 15_000, async () =>
      sent.filter((s) => s.phase === 'after' && s.status === 200).length >= 50,
    );
    running = false;
    await Promise.all(workers);

    // Every answer was a 200 with the Plant or a 503 Error record, and came within the bound.
    for (const s of sent) {
      assert.ok(s.status === 200 || s.status === 503, `id ${s.id} (${s.phase}) answered ${s.status}`);
      assert.equal(s.problem, undefined, `id ${s.id} (${s.phase}) answered ${s.status}: ${s.problem}`);
      assert.ok(s.elapsedMs < ANSWER_WITHIN_MS, `id ${s.id} (${s.phase}) took ${Math.round(s.elapsedMs)} ms`);
    }
    const outage = sent.filter((s) => s.status === 503);
    assert.ok(outage.length > 0);
    assert.ok(!server.exited(), 'the server process survived the outage');

    // Nothing answered 200 is lost, before or after the outage.
    const store = await openStore(loadConfig({ DATABASE_URL: databaseUrl }).database);
    try {
      const stored = new Set<bigint>();
      let afterId: bigint | undefined;
      for (;;) {
        const page = await store.listPlants({ limit: 1000, ...(afterId === undefined ? {} : { after: afterId }) });
        for (const row of page) stored.add(row.id);
        if (page.length < 1000) break;
        afterId = page.at(-1)?.id;
      }
      const lost = sent.filter((s) => s.status === 200 && !stored.has(s.id)).map((s) => s.id);
      assert.deepEqual(lost, []);
    } finally {
      await store.close();
    }

    // A client that retries what got 503 now succeeds: created, or replayed if it had committed after all.
    const retried = await Promise.all(outage.slice(0, 200).map((s) => create(s.id)));
    assert.deepEqual(
      retried.filter((r) => r.status !== 200 || r.problem !== undefined).map((r) => `${r.id}: ${r.status} ${r.problem}`),
      [],
    );

    const slowest503 = Math.max(...outage.map((s) => s.elapsedMs));
    t.diagnostic(
      `${sent.length} creates, ${outage.length} answered 503 (slowest ${Math.round(slowest503)} ms); ` +
        `/readyz 503 ${Math.round(unreadyAfterMs)} ms after the stop, 200 again ${Math.round(readyAfterMs)} ms after the restart`,
    );
  });
});
