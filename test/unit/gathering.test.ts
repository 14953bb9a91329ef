/**
 * Gathering (src/plants/gathering.ts), on the instance writer's queue over a recording fake store (no app, no
 * database): a commit is held until every worker with creates admitted has handed its batch over, commits at once
 * when none is coming, and at most maxWaitMs after its first batch arrived, or at once when the batch is full.
 * The batches handed over themselves (createBatch) are in test/unit/write-queue.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { plants, RecordingStore, writerQueue } from '../helpers/recording-store.js';

describe('WriteQueue gathering: a commit held for the batches other threads are about to hand over', () => {
  /** Which workers (by slot) have creates admitted and not yet handed over, as shared memory would say. */
  const admitted = new Set<number>();
  const gathering = (maxWaitMs: number) => ({ maxWaitMs, ownSource: 0, coming: (present: ReadonlySet<number>) => [...admitted].some((slot) => !present.has(slot)) });

  it('holds a commit until every worker with creates admitted has handed its batch over', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 500, gathering: gathering(1000) });
    admitted.clear();
    admitted.add(1).add(2);
    const first = writer.createBatch(plants(1, 2), 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(store.transactions.length, 0, 'worker 2 has creates on their way: the commit waits for them');
    const second = writer.createBatch(plants(10, 3), 2);
    await Promise.all([first, second]);
    assert.deepEqual(
      store.transactions.map((transaction) => transaction.length),
      [5],
    );
  });

  it('commits at once when no other worker has creates admitted', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 500, gathering: gathering(1000) });
    admitted.clear();
    admitted.add(1);
    const started = performance.now();
    await writer.createBatch(plants(1, 2), 1);
    assert.ok(performance.now() - started < 500, 'not held for the full wait');
    assert.equal(store.transactions.length, 1);
  });

  it('commits after maxWaitMs when the awaited batch does not come, and a full batch at once', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 4, gathering: gathering(30) });
    admitted.clear();
    admitted.add(1).add(2);
    const started = performance.now();
    await writer.createBatch(plants(1, 2), 1);
    const held = performance.now() - started;
    assert.ok(held >= 25, `held ${held.toFixed(1)} ms, at least about maxWaitMs`);
    const fullAt = performance.now();
    await writer.createBatch(plants(10, 4), 1);
    assert.ok(performance.now() - fullAt < 25, 'a batch at the limit is not held');
    assert.deepEqual(
      store.transactions.map((transaction) => transaction.length),
      [2, 4],
    );
    await writer.drain();
  });
});
