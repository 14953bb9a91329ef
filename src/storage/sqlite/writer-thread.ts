import { parentPort, workerData } from 'node:worker_threads';
import { openConnection } from './connection.js';
import { SqliteWriter, type WriterRequest, type WriterResponse } from './writer.js';

/** The SQLite writer thread: owns the write connection and answers one request at a time, in order. */
const { file, cacheMiB } = workerData as { file: string; cacheMiB: number };
const port = parentPort;
if (!port) throw new Error('writer-thread.ts runs only as a worker thread');

let writer: SqliteWriter | undefined;
let openError: { message: string; code: string } | undefined;
try {
  const db = openConnection(file, cacheMiB);
  // Checkpoints run on their own thread (checkpointer-thread.ts), never inside a commit.
  db.pragma('wal_autocheckpoint = 0');
  writer = new SqliteWriter(db);
} catch (error) {
  openError = { message: (error as Error).message, code: String((error as { code?: unknown }).code) };
}

port.on('message', ({ seq, op, args }: WriterRequest) => {
  let response: WriterResponse;
  try {
    if (!writer) throw Object.assign(new Error(openError?.message), { code: openError?.code });
    const method = writer[op] as (...values: unknown[]) => unknown;
    response = { seq, ok: true, result: method.apply(writer, args) };
  } catch (error) {
    response = { seq, ok: false, error: { message: (error as Error).message, code: String((error as { code?: unknown }).code) } };
  }
  port.postMessage(response);
  if (op === 'close') port.close();
});
