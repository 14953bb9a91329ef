/**
 * BatchWriter, the group commit of a SQLite instance's main thread across its workers: batches handed over in one
 * event-loop turn join one transaction (up to the batch limit, never splitting a worker's batch), each worker gets
 * its own rows' outcomes in order, the store is asked one transaction at a time, and a refused transaction refuses
 * every batch in it. The store here is a recording fake: what is tested is the writer's merging, not storage.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { alreadyStored, type CreateOutcome, type Plant, type PlantStore } from '../../src/storage/plant-store.js';
import { BatchWriter } from '../../src/workers/batch-writer.js';

const plants = (from: number, count: number): Plant[] =>
  Array.from({ length: count }, (_, index) => ({ id: BigInt(from + index), name: `p${from + index}`, tag: null }));

/** Records each transaction; answers every row created, except ids already stored (replayed or conflict, as stored), or refuses. */
class RecordingStore implements PlantStore {
  readonly transactions: Plant[][] = [];
  readonly stored = new Map<bigint, Plant>();
  committing = 0;
  mostAtOnce = 0;
  refuse: Error | undefined;

  async create(batch: readonly Plant[]): Promise<CreateOutcome[]> {
    this.committing += 1;
    this.mostAtOnce = Math.max(this.mostAtOnce, this.committing);
    try {
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (this.refuse) throw this.refuse;
      this.transactions.push([...batch]);
      return batch.map((plant): CreateOutcome => {
        const stored = this.stored.get(plant.id);
        if (stored) return alreadyStored(stored, plant);
        this.stored.set(plant.id, plant);
        return { kind: 'created' };
      });
    } finally {
      this.committing -= 1;
    }
  }

  get = () => Promise.resolve(undefined);
  list = () => Promise.resolve([]);
  delete = () => Promise.resolve(false);
}

describe('BatchWriter', () => {
  it('commits the batches of one turn as one transaction and answers each with its own rows, in order', async () => {
    const store = new RecordingStore();
    const committed: number[] = [];
    let woken = 0;
    const writer = new BatchWriter(store, { batchLimit: 500, observer: { batchCommitted: (rows) => committed.push(rows) }, onCreated: () => (woken += 1) });
    const [a, b, c] = await Promise.all([writer.write(plants(1, 3)), writer.write(plants(10, 2)), writer.write(plants(20, 4))]);
    assert.equal(store.transactions.length, 1);
    assert.deepEqual(store.transactions[0]?.map((plant) => plant.id), [1n, 2n, 3n, 10n, 11n, 20n, 21n, 22n, 23n]);
    assert.deepEqual([a?.length, b?.length, c?.length], [3, 2, 4]);
    assert.deepEqual(committed, [9]);
    assert.equal(woken, 1);
  });

  it('answers a repeated id across two workers\' batches as the store left it: created once, the later copy a conflict with the first', async () => {
    const store = new RecordingStore();
    const writer = new BatchWriter(store, { batchLimit: 500 });
    const first: Plant = { id: 7n, name: 'first', tag: null };
    const [one, two] = await Promise.all([writer.write([first]), writer.write([{ id: 7n, name: 'second', tag: 'x' }])]);
    assert.deepEqual(one, [{ kind: 'created' }]);
    assert.deepEqual(two, [{ kind: 'conflict', stored: first }]);
  });

  it('keeps a transaction within the batch limit without splitting a batch, and commits one transaction at a time', async () => {
    const store = new RecordingStore();
    const writer = new BatchWriter(store, { batchLimit: 5 });
    await Promise.all([writer.write(plants(1, 3)), writer.write(plants(10, 3)), writer.write(plants(20, 2)), writer.write(plants(30, 7))]);
    assert.deepEqual(
      store.transactions.map((transaction) => transaction.length),
      [3, 5, 7],
      'the second and third batches share one transaction; a batch over the limit commits alone',
    );
    assert.equal(store.mostAtOnce, 1);
  });

  it('merges the batches that arrive while a transaction commits into the next one', async () => {
    const store = new RecordingStore();
    const writer = new BatchWriter(store, { batchLimit: 500 });
    const first = writer.write(plants(1, 1));
    // The first transaction is committing (the fake takes 5 ms): these three arrive meanwhile, in other turns.
    await new Promise((resolve) => setTimeout(resolve, 1));
    const later = [writer.write(plants(10, 1))];
    await new Promise((resolve) => setImmediate(resolve));
    later.push(writer.write(plants(20, 1)), writer.write(plants(30, 1)));
    await Promise.all([first, ...later]);
    assert.deepEqual(
      store.transactions.map((transaction) => transaction.length),
      [1, 3],
    );
  });

  it('refuses every batch of a transaction storage refused, with storage\'s error, and goes on with the next', async () => {
    const store = new RecordingStore();
    const writer = new BatchWriter(store, { batchLimit: 500 });
    store.refuse = new StorageUnavailableError('disk full');
    const refused = await Promise.allSettled([writer.write(plants(1, 2)), writer.write(plants(5, 1))]);
    assert.deepEqual(
      refused.map((result) => result.status === 'rejected' && result.reason === store.refuse),
      [true, true],
    );
    store.refuse = undefined;
    assert.deepEqual(await writer.write(plants(1, 1)), [{ kind: 'created' }]);
  });

  it('drain waits for every batch handed over', async () => {
    const store = new RecordingStore();
    const writer = new BatchWriter(store, { batchLimit: 500 });
    let answered = false;
    void writer.write(plants(1, 2)).then(() => (answered = true));
    await writer.drain();
    assert.equal(answered, true);
    await writer.drain();
  });

  describe('gathering', () => {
    /** Which workers (by slot) have creates admitted and not yet handed over, as shared memory would say. */
    const admitted = new Set<number>();
    const gathering = (maxWaitMs: number) => ({ maxWaitMs, coming: (present: ReadonlySet<number>) => [...admitted].some((slot) => !present.has(slot)) });

    it('holds a commit until every worker with creates admitted has handed its batch over', async () => {
      const store = new RecordingStore();
      const writer = new BatchWriter(store, { batchLimit: 500, gathering: gathering(1000) });
      admitted.clear();
      admitted.add(1).add(2);
      const first = writer.write(plants(1, 2), 1);
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(store.transactions.length, 0, 'worker 2 has creates on their way: the commit waits for them');
      const second = writer.write(plants(10, 3), 2);
      await Promise.all([first, second]);
      assert.deepEqual(
        store.transactions.map((transaction) => transaction.length),
        [5],
      );
    });

    it('commits at once when no other worker has creates admitted', async () => {
      const store = new RecordingStore();
      const writer = new BatchWriter(store, { batchLimit: 500, gathering: gathering(1000) });
      admitted.clear();
      admitted.add(1);
      const started = performance.now();
      await writer.write(plants(1, 2), 1);
      assert.ok(performance.now() - started < 500, 'not held for the full wait');
      assert.equal(store.transactions.length, 1);
    });

    it('commits after maxWaitMs when the awaited batch does not come, and a full batch at once', async () => {
      const store = new RecordingStore();
      const writer = new BatchWriter(store, { batchLimit: 4, gathering: gathering(30) });
      admitted.clear();
      admitted.add(1).add(2);
      const started = performance.now();
      await writer.write(plants(1, 2), 1);
      const held = performance.now() - started;
      assert.ok(held >= 25, `held ${held.toFixed(1)} ms, at least about maxWaitMs`);
      const fullAt = performance.now();
      await writer.write(plants(10, 4), 1);
      assert.ok(performance.now() - fullAt < 25, 'a batch at the limit is not held');
      assert.deepEqual(
        store.transactions.map((transaction) => transaction.length),
        [2, 4],
      );
      await writer.drain();
    });
  });
});
