/**
 * Under a steady stream of commits the SQLite WAL is started again from its beginning now and then, rather than
 * growing for as long as the load lasts: a PASSIVE checkpoint never catches up with a writer that never pauses, so
 * the checkpointer thread follows one of a long WAL with a RESTART checkpoint (src/storage/sqlite/checkpointer-thread.ts).
 * What holds whatever the timing: the WAL's header counts its restarts, and the file stays shorter than the frames the
 * commits wrote. Every plant created is still there afterwards.
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
const BATCHES = 200;
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
  const writtenBefore = bytesWritten();
  try {
    const writer = async () => {
      for (let batch = 0; batch < BATCHES; batch += 1) {
        // Random ids (each one unique by its low bits), so that every batch dirties pages all over the B-trees.
        const plants: Plant[] = Array.from({ length: BATCH }, () => ({ id: BigInt(Math.floor(Math.random() * 2 ** 40)) * 2n ** 20n + BigInt(next++), name: 'Ficus lyrata', tag: next % 3 ? 'fig' : null }));
        const outcomes = await store.plants.create(plants);
        assert.ok(outcomes.every((outcome) => outcome.kind === 'created'));
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, () => writer()));
    // Read while the store is open: its connections keep the WAL.
    const restarts = walRestarts(file);
    const walBytes = fs.statSync(`${file}-wal`).size;
    const written = bytesWritten() - writtenBefore;
    t.diagnostic(`WAL restarted ${restarts} times, ${walBytes} bytes long; ${written} bytes written (frames into the WAL, pages copied into the database)`);
    assert.ok(restarts >= 1, 'the WAL was started again from its beginning under load');
    // Grown for as long as the load lasted, the WAL would hold every frame written: more than half of all the bytes.
    assert.ok(walBytes < written / 3, `the WAL (${walBytes} bytes) is a small part of what was written (${written} bytes)`);
  } finally {
    await store.close();
  }
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    assert.equal((db.prepare('SELECT count(*) AS n FROM plants').get() as { n: number }).n, WRITERS * BATCHES * BATCH, 'every plant created is stored');
  } finally {
    db.close();
  }
});
