import { parentPort, workerData } from 'node:worker_threads';
import { openConnection } from './connection.js';

/**
 * Copies the WAL back into the database file, on a thread of its own. Left to SQLite's auto-checkpoint, this work
 * (and its fsync of the database file) would run inside whichever commit crossed the threshold, stalling every
 * create in that batch; PASSIVE never waits for the writer, so commits go on while it runs.
 */
const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const port = parentPort;
if (!port) throw new Error('checkpointer-thread.ts runs only as a worker thread');

const db = openConnection(file, 2);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const timer = setInterval(() => {
  try {
    checkpoint.run();
  } catch {
    // Busy or failing storage: the next interval tries again, and the writer reports real failures.
  }
}, intervalMs);

port.on('message', () => {
  clearInterval(timer);
  db.close();
  port.close();
});
