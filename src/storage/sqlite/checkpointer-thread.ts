import { parentPort, workerData } from 'node:worker_threads';
import type { CheckpointerCommand, CheckpointerReport, CheckpointerThreadData } from './checkpointer.js';
import { SQLITE_CODES, openConnection, prepareWrite } from './connection.js';

/**
 * Copies the WAL back into the database file, on a thread of its own. Left to SQLite's auto-checkpoint, this work
 * (and its fsync of the database file) would run inside whichever commit crossed the threshold, stalling every
 * create in that batch; PASSIVE never waits for the writer, so commits go on while it runs.
 *
 * Nothing else checkpoints the WAL, so a failing checkpoint must not go unnoticed: each failure is reported to the
 * main thread (src/storage/sqlite/checkpointer.ts), and so is the first success after a start or after failures.
 */
const { file, intervalMs } = workerData as CheckpointerThreadData;
const port = parentPort;
if (!port) throw new Error('checkpointer-thread.ts runs only as a worker thread');

const report = (message: CheckpointerReport) => port.postMessage(message);

const db = openConnection(file, 2);
const checkpoint = prepareWrite<[]>(db, 'PRAGMA wal_checkpoint(PASSIVE)');
/** Whether the main thread last heard of a success; it hears of every failure, so a run of them can be counted. */
let reportedOk = false;
/** Checkpoints still to fail on purpose (CheckpointerCommand 'fail', for tests). */
let failuresToSimulate = 0;

const timer = setInterval(() => {
  try {
    if (failuresToSimulate > 0) {
      failuresToSimulate -= 1;
      throw Object.assign(new Error('simulated checkpoint failure'), { code: 'ERR_SQLITE_ERROR', errcode: SQLITE_CODES.IOERR });
    }
    // A lock held elsewhere is not an error here: PASSIVE then checkpoints what it can, and the next interval the rest.
    checkpoint.run();
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
      port.close();
      return;
    case 'crash':
      throw new Error('checkpointer thread crashed on purpose');
    case 'fail':
      failuresToSimulate = command.count;
      return;
  }
});
