/**
 * SQLite's WAL is checkpointed only by the checkpointer thread (the write connection's automatic checkpoints are off),
 * so a thread that dies, or checkpoints that keep failing inside it, must never go unnoticed: each is logged, a dead
 * thread is restarted (ever more slowly if it keeps dying), and /readyz answers 503 while the WAL cannot be
 * checkpointed, 200 again once it can. Whether a checkpoint happened is read from the database file itself: rows
 * committed to the WAL appear in a copy of the file (without its WAL) only once they have been checkpointed. The
 * restarts' growing delay, which needs no app, is in test/storage/sqlite-checkpointer.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import type { FastifyInstance } from 'fastify';
import { createLogger } from '../../src/observability/log.js';
import { READY_REUSE_MS } from '../../src/health/readiness.js';
import { CHECKPOINTER_DEFAULTS } from '../../src/storage/sqlite/checkpointer.js';
import { prepareValue } from '../../src/storage/sqlite/connection.js';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store.js';
import { useTestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { sqliteDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Rows with ids in [from, to) in the database file alone, i.e. checkpointed: the file is copied without its WAL and
 * the copy read. Undefined when the copy caught a checkpoint half-written (it is then simply read again).
 */
function checkpointedRows(file: string, scratch: string, from: bigint, to: bigint): number | undefined {
  const copy = path.join(scratch, `copy-${process.hrtime.bigint()}.db`);
  fs.copyFileSync(file, copy);
  try {
    const db = new DatabaseSync(copy);
    try {
      return prepareValue<[bigint, bigint], number>(db, 'SELECT count(*) FROM plants WHERE id >= ? AND id < ?').get(from, to);
    } finally {
      db.close();
    }
  } catch {
    return undefined;
  } finally {
    for (const leftover of [copy, `${copy}-wal`, `${copy}-shm`]) fs.rmSync(leftover, { force: true });
  }
}

interface Fixture {
  /** The database's folder and file. */
  readonly dir: string;
  readonly file: string;
  readonly store: SqliteStore;
  readonly app: FastifyInstance;
  /** The app's log lines, parsed. */
  readonly logLines: Array<{ level: number; msg: string; err?: { message: string } }>;
}

/** The app of a suite on a SQLite store whose checkpointer thread is restarted `restartDelayMs` after it dies. */
function useFixture(restartDelayMs: number): Fixture {
  const logLines: Fixture['logLines'] = [];
  let store: SqliteStore | undefined;
  const t = useTestApp(
    sqliteDatabase,
    {},
    {
      log: createLogger({ logLevel: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line) as Fixture['logLines'][number]) }),
      openStore: ({ database }) => {
        if (database.kind !== 'sqlite') throw new Error('the checkpointer is SQLite\'s');
        store = SqliteStore.open(database.path, { checkpointer: { restartDelayMs } });
        return store;
      },
    },
  );
  return {
    get dir() {
      return path.dirname(this.file);
    },
    get file() {
      return t.databaseUrl.slice('sqlite:'.length);
    },
    get store() {
      assert.ok(store, 'the store opens in the suite\'s before hook');
      return store;
    },
    get app() {
      return t.app;
    },
    logLines,
  };
}

const plants = (from: number, count: number) =>
  Array.from({ length: count }, (_, index) => ({ id: BigInt(from + index), name: `Fern ${from + index}`, tag: null }));

const readyz = (app: FastifyInstance) => app.inject({ method: 'GET', url: '/readyz' });
const logged = (f: Fixture, level: number, message: RegExp) => f.logLines.find((line) => line.level === level && message.test(line.msg));
const ERROR = 50;
const WARN = 40;
const INFO = 30;

describe('the SQLite checkpointer thread', () => {
  // Long enough to probe /readyz while the thread is dead, short enough for a quick test.
  const RESTART_DELAY_MS = 1500;
  const f = useFixture(RESTART_DELAY_MS);

  it('when it dies: logged, /readyz 503 while it is down, restarted, checkpoints resume, /readyz 200 again', async (t) => {
    assert.equal((await readyz(f.app)).statusCode, 200);
    await f.store.plants.create(plants(1, 20));
    const firstCheckpointMs = Math.round(await waitFor('rows checkpointed before the crash', () => checkpointedRows(f.file, f.dir, 1n, 21n) === 20, { timeoutMs: 5000, intervalMs: 20 }));

    const crashedAt = performance.now();
    f.store.checkpointer.command({ kind: 'crash' });
    await waitFor('the death logged', () => logged(f, ERROR, /checkpointer thread died/) !== undefined, { timeoutMs: 2000, intervalMs: 20 });
    const death = logged(f, ERROR, /checkpointer thread died/);
    assert.equal(death?.err?.message, 'checkpointer thread crashed on purpose', 'the log carries the thread\'s error');

    // A heartbeat that succeeded before the crash answers probes for READY_REUSE_MS; after that, the truth.
    await sleep(READY_REUSE_MS);
    assertErrorRecord(await readyz(f.app), 503);
    // Commits go on meanwhile, into the WAL only.
    await f.store.plants.create(plants(1001, 50));
    assert.equal(checkpointedRows(f.file, f.dir, 1001n, 1051n), 0, 'nothing checkpoints while the thread is dead');
    assertErrorRecord(await readyz(f.app), 503);

    await waitFor('the restart logged', () => logged(f, INFO, /checkpointer thread was restarted/) !== undefined, { timeoutMs: RESTART_DELAY_MS + 2000, intervalMs: 20 });
    const downMs = Math.round(performance.now() - crashedAt);
    assert.ok(downMs >= RESTART_DELAY_MS, `restarted after ${downMs} ms, not before the ${RESTART_DELAY_MS} ms delay`);
    const resumedMs = Math.round(await waitFor('the rows committed meanwhile checkpointed', () => checkpointedRows(f.file, f.dir, 1001n, 1051n) === 50, { timeoutMs: 5000, intervalMs: 20 }));
    const readyMs = Math.round(await waitFor('/readyz 200 again', async () => (await readyz(f.app)).statusCode === 200, { timeoutMs: 3000, intervalMs: 20 }));
    assert.ok(logged(f, INFO, /restarted SQLite checkpointer thread checkpoints again/), 'the recovery is logged');
    assert.ok(f.store.checkpointer.problem === undefined);
    t.diagnostic(
      `checkpointer crash: rows checkpointed ${firstCheckpointMs} ms after commit before it; thread restarted ${downMs} ms after ` +
        `the crash; rows committed meanwhile checkpointed ${resumedMs} ms and /readyz 200 ${resumedMs + readyMs} ms after the restart`,
    );
  });

  it('when checkpoints keep failing inside it: logged, /readyz 503 after a few in a row, 200 again once one succeeds', async (t) => {
    const { intervalMs, failuresToUnready } = CHECKPOINTER_DEFAULTS;
    assert.equal((await readyz(f.app)).statusCode, 200);
    const failures = failuresToUnready + 6;
    f.store.checkpointer.command({ kind: 'fail', count: failures });
    await waitFor('the first failure logged', () => logged(f, WARN, /a WAL checkpoint failed/) !== undefined, { timeoutMs: 2000, intervalMs: 20 });
    assert.equal(logged(f, WARN, /a WAL checkpoint failed/)?.err?.message, 'simulated checkpoint failure');
    const unreadyMs = Math.round(
      await waitFor('the run of failures logged', () => logged(f, ERROR, /WAL checkpoints keep failing/) !== undefined, {
        timeoutMs: failuresToUnready * intervalMs + 2000,
        intervalMs: 20,
      }),
    );
    await sleep(READY_REUSE_MS);
    const unready = await readyz(f.app);
    assertErrorRecord(unready, 503);
    // The 503 is logged with its cause, as every 5xx is: the operator sees why the instance is unready.
    assert.ok(
      f.logLines.some((line) => line.level === ERROR && /storage is unavailable.*the last \d+ WAL checkpoints failed/.test(line.err?.message ?? '')),
      '/readyz logs why it answered 503',
    );
    await waitFor('the success logged', () => logged(f, INFO, /WAL checkpoints succeed again after \d+ failed/) !== undefined, { timeoutMs: failures * intervalMs + 3000, intervalMs: 20 });
    assert.equal((await readyz(f.app)).statusCode, 200);
    t.diagnostic(`${failures} checkpoints failing: logged at once, unready after ${unreadyMs} ms more, ready again after the first success`);
  });
});
