import fs from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import type { CheckpointerCommand, CheckpointerReport, CheckpointerThreadData } from './checkpointer.js';
import { SQLITE_CODES, openConnection, prepare } from './connection.js';

/**
 * Copies the WAL back into the database file, on a thread of its own. Left to SQLite's auto-checkpoint, this work
 * (and its fsync of the database file) would run inside whichever commit crossed the threshold, stalling every
 * create in that batch; PASSIVE never waits for the writer, so commits go on while it runs.
 *
 * Nothing else checkpoints the WAL, so a failing checkpoint must not go unnoticed: each failure is reported to the
 * main thread (src/storage/sqlite/checkpointer.ts), and so is the first success after a start or after failures.
 */
const { file, intervalMs, maxDelayMs, walFrames } = workerData as CheckpointerThreadData;
const port = parentPort;
if (!port) throw new Error('checkpointer-thread.ts runs only as a worker thread');

/*
 * walFrames: a checkpoint copies each page once however many commits rewrote it, so fewer, larger checkpoints copy
 * fewer pages per create when random ids dirty the same leaves again and again; a checkpoint runs early once that
 * many frames wait.
 *
 * And a PASSIVE checkpoint copies what was committed before it began; under a steady stream of commits there are
 * always newer frames by the time it ends, so the WAL is never wholly copied when the writer begins a transaction,
 * which is the only time SQLite starts the WAL again from its beginning: it would grow for as long as the load lasts,
 * every commit extending the file. So after a PASSIVE checkpoint of a WAL longer than walFrames, a RESTART one
 * follows: it takes the writer's lock between two commits, copies the few frames committed meanwhile, and the next
 * commit starts the WAL from its beginning, overwriting it in place.
 */

/**
 * A checkpoint syncs the database file only when it has copied the whole WAL, and the RESTART one is the first under
 * load to do so: left to it, that sync would flush every page the PASSIVE rounds before it wrote (tens of thousands of
 * random pages in a large store) while it holds the writer's lock, stalling every create. So the thread syncs the
 * database file itself first, off the lock (an extra sync is never unsafe: SQLite's own order of syncs is unchanged),
 * then copies, PASSIVE, what was committed meanwhile, and again, until a round has copied at most this many frames or
 * SYNC_ROUNDS have run: what RESTART then copies and syncs under the lock is only that round's and what came after it.
 */
const RESTART_REMAINDER_FRAMES = 512;
const SYNC_ROUNDS = 4;

/** How long a RESTART checkpoint waits for the writer's lock (held only while a batch commits) before leaving it to the next one. */
const RESTART_LOCK_WAIT_MS = 200;

const report = (message: CheckpointerReport) => port.postMessage(message);

const db = openConnection(file, 2);
// Only RESTART waits for a lock (in SQLite's busy handler, on this thread); PASSIVE and NOOP never do.
db.exec(`PRAGMA busy_timeout = ${RESTART_LOCK_WAIT_MS}`);
/** The database file, synced from here before a RESTART checkpoint (fsync reaches what any descriptor wrote). */
const dbFd = fs.openSync(file, 'r');

/** What PRAGMA wal_checkpoint answers: whether it was kept from finishing, the frames in the WAL, and those copied. */
interface CheckpointRow {
  readonly busy: number;
  readonly log: number;
  readonly checkpointed: number;
}
// NOOP only reads the WAL's counters (an SQLite too old to know it runs PASSIVE instead: a checkpoint every interval).
const look = prepare<[], CheckpointRow>(db, 'PRAGMA wal_checkpoint(NOOP)');
const passive = prepare<[], CheckpointRow>(db, 'PRAGMA wal_checkpoint(PASSIVE)');
const restart = prepare<[], CheckpointRow>(db, 'PRAGMA wal_checkpoint(RESTART)');

/** Whether the main thread last heard of a success; it hears of every failure, so a run of them can be counted. */
let reportedOk = false;
/** Checkpoints still to fail on purpose (CheckpointerCommand 'fail', for tests). */
let failuresToSimulate = 0;
/** When the last checkpoint ran (0: none since the start, so the first interval checkpoints). */
let checkpointedAt = 0;

/** One interval's work: a look at the WAL, and a checkpoint if one is due. Throws what a checkpoint threw. */
function tick(): boolean {
  const now = Date.now();
  // Until a checkpoint has succeeded (after a start or a failure), every interval checkpoints.
  if (reportedOk && now - checkpointedAt < maxDelayMs) {
    const wal = look.get();
    if (wal === undefined || wal.log - wal.checkpointed < walFrames) return false;
  }
  checkpointedAt = now;
  if (failuresToSimulate > 0) {
    failuresToSimulate -= 1;
    throw Object.assign(new Error('simulated checkpoint failure'), { code: 'ERR_SQLITE_ERROR', errcode: SQLITE_CODES.IOERR });
  }
  // A lock held elsewhere is not an error here: PASSIVE then checkpoints what it can, and the next time the rest.
  const copied = passive.get();
  if (copied === undefined || copied.log <= walFrames) return true;
  let synced = copied.checkpointed;
  for (let round = 0; round < SYNC_ROUNDS; round += 1) {
    fs.fsyncSync(dbFd);
    const wal = passive.get();
    if (wal === undefined) break;
    const copiedNow = wal.checkpointed - synced;
    synced = wal.checkpointed;
    if (copiedNow <= RESTART_REMAINDER_FRAMES) break;
  }
  restart.get();
  return true;
}

const timer = setInterval(() => {
  try {
    if (!tick()) return;
  } catch (error) {
    reportedOk = false;
    const { name, message, code, errcode } = error as { name?: unknown; message?: unknown; code?: unknown; errcode?: unknown };
    report({
      kind: 'failed',
      name: String(name),
      message: String(message),
      ...(typeof code === 'string' ? { code } : {}),
      ...(typeof errcode === 'number' ? { errcode } : {}),
    });
    return;
  }
  if (!reportedOk) {
    reportedOk = true;
    report({ kind: 'ok' });
  }
}, intervalMs);

port.on('message', (command: CheckpointerCommand) => {
  switch (command.kind) {
    case 'stop':
      clearInterval(timer);
      db.close();
      fs.closeSync(dbFd);
      port.close();
      return;
    case 'crash':
      throw new Error('checkpointer thread crashed on purpose');
    case 'fail':
      failuresToSimulate = command.count;
      // The next interval checkpoints, so that the failures begin at once.
      checkpointedAt = 0;
      return;
  }
});
