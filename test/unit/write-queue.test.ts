/**
 * WriteQueue (src/plants/write-queue.ts) across an instance's threads, on a recording fake store (no app, no database).
 *
 * createBatch, the group commit of a SQLite instance's main thread across its threads: batches handed over in one
 * event-loop turn join one transaction (up to the batch limit, never splitting a worker's batch), each worker gets its
 * own rows' outcomes in order, the store is asked one transaction at a time, and a refused transaction refuses every
 * batch in it. What is tested is the writer's merging, not storage.
 *
 * The hold for batches on their way is in test/unit/gathering.test.ts; the bound, one queue's and an instance's
 * shared by its threads, in test/unit/write-bound.test.ts; streams' lanes in test/unit/write-lanes.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import type { Plant } from '../../src/plant.js';
import { plants, RecordingStore, writerQueue } from '../helpers/recording-store.js';

describe('WriteQueue: batches handed over by other threads (createBatch)', () => {
  it('commits the batches of one turn as one transaction and answers each with its own rows, in order', async () => {
    const store = new RecordingStore();
    const committed: number[] = [];
    let woken = 0;
    const writer = writerQueue(store, { batchLimit: 500, observer: { batchCommitted: (rows) => committed.push(rows) }, onCreated: () => (woken += 1) });
    const [a, b, c] = await Promise.all([writer.createBatch(plants(1, 3), 1), writer.createBatch(plants(10, 2), 1), writer.createBatch(plants(20, 4), 1)]);
    assert.equal(store.transactions.length, 1);
    assert.deepEqual(store.transactions[0]?.map((plant) => plant.id), [1n, 2n, 3n, 10n, 11n, 20n, 21n, 22n, 23n]);
    assert.deepEqual([a?.length, b?.length, c?.length], [3, 2, 4]);
    assert.deepEqual(committed, [9]);
    assert.equal(woken, 1);
  });

  it('answers a repeated id across two workers\' batches as the store left it: created once, the later copy finding the first', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 500 });
    const first: Plant = { id: 7n, name: 'first', tag: null };
    const [one, two] = await Promise.all([writer.createBatch([first], 1), writer.createBatch([{ id: 7n, name: 'second', tag: 'x' }], 2)]);
    assert.deepEqual(one, [{ kind: 'created' }]);
    assert.deepEqual(two, [{ kind: 'existing', stored: first }]);
  });

  it('keeps a transaction within the batch limit without splitting a batch, and commits one transaction at a time', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 5 });
    await Promise.all([writer.createBatch(plants(1, 3), 1), writer.createBatch(plants(10, 3), 1), writer.createBatch(plants(20, 2), 1), writer.createBatch(plants(30, 7), 1)]);
    assert.deepEqual(
      store.transactions.map((transaction) => transaction.length),
      [3, 5, 7],
      'the second and third batches share one transaction; a batch over the limit commits alone',
    );
    assert.equal(store.mostAtOnce, 1);
  });

  it('merges the batches that arrive while a transaction commits into the next one', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 500 });
    const first = writer.createBatch(plants(1, 1), 1);
    // The first transaction is committing (the fake takes 5 ms): these three arrive meanwhile, in other turns.
    await new Promise((resolve) => setTimeout(resolve, 1));
    const later = [writer.createBatch(plants(10, 1), 1)];
    await new Promise((resolve) => setImmediate(resolve));
    later.push(writer.createBatch(plants(20, 1), 1), writer.createBatch(plants(30, 1), 1));
    await Promise.all([first, ...later]);
    assert.deepEqual(
      store.transactions.map((transaction) => transaction.length),
      [1, 3],
    );
  });

  it('refuses every batch of a transaction storage refused, with storage\'s error, and goes on with the next', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 500 });
    store.refuse = new StorageUnavailableError('disk full');
    const refused = await Promise.allSettled([writer.createBatch(plants(1, 2), 1), writer.createBatch(plants(5, 1), 1)]);
    assert.deepEqual(
      refused.map((result) => result.status === 'rejected' && result.reason === store.refuse),
      [true, true],
    );
    store.refuse = undefined;
    assert.deepEqual(await writer.createBatch(plants(1, 1), 1), [{ kind: 'created' }]);
  });

  it("commits the writer thread's own creates and the batches handed over in one transaction, answering each its own", async () => {
    const store = new RecordingStore();
    const committed: number[] = [];
    const writer = writerQueue(store, { batchLimit: 500, observer: { batchCommitted: (rows) => committed.push(rows) } });
    const own = writer.create({ id: 100n, name: 'own', tag: null });
    const handed = writer.createBatch(plants(1, 2), 1);
    const again = writer.create({ id: 1n, name: 'p1', tag: null });
    assert.equal(writer.depth, 2, 'only its own creates count against its bound');
    const [ownOutcome, handedOutcomes, againOutcome] = await Promise.all([own, handed, again]);
    assert.deepEqual(store.transactions.map((transaction) => transaction.map((plant) => plant.id)), [[100n, 1n, 2n, 1n]]);
    assert.deepEqual(committed, [4]);
    assert.deepEqual(ownOutcome, { kind: 'created' });
    assert.deepEqual(handedOutcomes, [{ kind: 'created' }, { kind: 'created' }]);
    assert.deepEqual(againOutcome, { kind: 'existing', stored: { id: 1n, name: 'p1', tag: null } });
    assert.equal(writer.depth, 0);
  });

  it('gives the store, for a transaction with traced batches handed over, one traceparent per row aligned with it (own creates and untraced rows undefined), and none when nothing handed over was traced', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 500 });
    const a = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const b = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await Promise.all([
      writer.create({ id: 100n, name: 'own', tag: null }),
      writer.createBatch(plants(1, 2), 1, [a, undefined]),
      writer.createBatch(plants(10, 2), 2),
      writer.createBatch(plants(20, 1), 1, [b]),
    ]);
    assert.deepEqual(store.transactions.map((transaction) => transaction.map((plant) => plant.id)), [[100n, 1n, 2n, 10n, 11n, 20n]]);
    assert.deepEqual(store.traceparents, [[undefined, a, undefined, undefined, undefined, b]]);

    // One handed-over plant per entry: the transaction is as many rows as entries, and still carries its traceparent.
    await Promise.all([writer.createBatch(plants(30, 1), 1, [a]), writer.create({ id: 101n, name: 'own', tag: null })]);
    assert.deepEqual(store.traceparents[1], [a, undefined]);

    await Promise.all([writer.createBatch(plants(40, 2), 1), writer.create({ id: 102n, name: 'own', tag: null })]);
    assert.equal(store.traceparents[2], undefined, 'an untraced transaction is given no traceparents');
  });

  it('drain waits for every batch handed over', async () => {
    const store = new RecordingStore();
    const writer = writerQueue(store, { batchLimit: 500 });
    let answered = false;
    void writer.createBatch(plants(1, 2), 1).then(() => (answered = true));
    await writer.drain();
    assert.equal(answered, true);
    await writer.drain();
  });
});
