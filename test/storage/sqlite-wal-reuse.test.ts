/**
 * Under a steady stream of commits the SQLite WAL is started again from its beginning now and then, rather than
 * growing for as long as the load lasts: a PASSIVE checkpoint never catches up with a writer that never pauses, so
 * the checkpointer thread follows one of a long WAL with a RESTART checkpoint (src/storage/sqlite/checkpointer-thread.ts).
 * The WAL's header counts its restarts. How long the WAL gets between two restarts depends on the machine (the
 * commits made while a checkpoint syncs the database file), so the writers go on until the WAL has been started again
 * RESTARTS times and is a small part of all that was written. Without the RESTART checkpoint the WAL is started again
 * only when the writers happen to pause while a PASSIVE one ends (none to two times in the writers' first
 * BATCHES, where the RESTART one starts it again twenty times and more), and it holds most frames written, so the
 * writers reach their cap first and the test fails. Every plant created is still there afterwards.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store.js';
import type { Plant } from '../../src/plant.js';

/** Writers creating at once, so that a commit is always waiting for the one before it. */
const WRITERS = 4;
/** Batches each writer creates before the WAL is first judged, and the most it creates while the WAL is not yet small. */
const BATCHES = 200;
const MAX_BATCHES = 8 * BATCHES;
/** Times the WAL must have been started again. */
const RESTARTS = 10;
const BATCH = 40;
/** Bytes this process has written so far, through any file (Linux's /proc/self/io). */
function bytesWritten(): number {
  const match = /^wchar: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'));
  assert.ok(match, '/proc/self/io has wchar');
  return Number(match[1]);
}

/** The WAL header's checkpoint sequence number (bytes 12-15, big-endian): how many times the WAL was started again. */
function walRestarts(file: string): number {
  const fd = fs.openSync(`${file}-wal`, 'r');
  try {
    const header = Buffer.alloc(16);
    fs.readSync(fd, header, 0, 16, 0);
    return header.readUInt32BE(12);
  } finally {
    fs.closeSync(fd);
  }
}

it('a WAL under a steady stream of creates with random ids is started again from its beginning, not grown while they last', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-wal-reuse-'));
  const file = path.join(dir, 'plants.db');
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = SqliteStore.open(file, { checkpointer: { intervalMs: 10, maxDelayMs: 10, walFrames: 64 } });
  let next = 1;
  let created = 0;
  const writtenBefore = bytesWritten();
  /** The WAL's restarts and length, and the bytes written so far; read while the store is open (its connections keep the WAL). */
  const measure = () => ({ restarts: walRestarts(file), walBytes: fs.statSync(`${file}-wal`).size, written: bytesWritten() - writtenBefore });
  // Grown for as long as the load lasted, the WAL would hold every frame written: more than half of all the bytes.
  const small = ({ restarts, walBytes, written }: ReturnType<typeof measure>) => restarts >= RESTARTS && walBytes < written / 3;
  let reached = false;
  try {
    const writer = async () => {
      for (let batch = 0; batch < MAX_BATCHES && !reached; batch += 1) {
        // Random ids (each one unique by its low bits), so that every batch dirties pages all over the B-trees.
        const plants: Plant[] = Array.from({ length: BATCH }, () => ({ id: BigInt(Math.floor(Math.random() * 2 ** 40)) * 2n ** 20n + BigInt(next++), name: 'Ficus lyrata', tag: next % 3 ? 'fig' : null }));
        const outcomes = await store.plants.create(plants);
        assert.ok(outcomes.every((outcome) => outcome.kind === 'created'));
        created += plants.length;
        if (batch >= BATCHES && small(measure())) reached = true;
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, () => writer()));
    const last = measure();
    t.diagnostic(`after ${created} creates: WAL restarted ${last.restarts} times, ${last.walBytes} bytes long; ${last.written} bytes written (frames into the WAL, pages copied into the database)`);
    assert.ok(last.restarts >= RESTARTS, `the WAL was started again from its beginning under load at least ${RESTARTS} times in ${created} creates`);
    assert.ok(last.walBytes < last.written / 3, `the WAL (${last.walBytes} bytes) is a small part of what was written (${last.written} bytes)`);
  } finally {
    await store.close();
  }
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    assert.equal((db.prepare('SELECT count(*) AS n FROM plants').get() as { n: number }).n, created, 'every plant created is stored');
  } finally {
    db.close();
  }
});
