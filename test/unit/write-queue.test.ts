/**
 * WriteQueue (src/plants/write-queue.ts) across an instance's threads, on fake stores (no app, no database).
 *
 * createBatch, the group commit of a SQLite instance's main thread across its threads: batches handed over in one
 * event-loop turn join one transaction (up to the batch limit, never splitting a worker's batch), each worker gets its
 * own rows' outcomes in order, the store is asked one transaction at a time, and a refused transaction refuses every
 * batch in it. Its store is a recording fake: what is tested is the writer's merging, not storage.
 *
 * Two workers' write queues on one instance's shared bound (WriteQueueOptions.shared): a create or a delete is refused
 * (WriteQueueFullError, answered 503) when the writes waiting in every queue together reach WRITE_QUEUE_LIMIT,
 * whichever queue holds them; a batch handed to storage, or a delete answered, makes room in any queue; a refusal by
 * storage in one queue makes every queue report it (readiness), until a batch commits whole. Their store holds each
 * call until the test lets it go.
 *
 * One queue's bound alone is in test/unit/write-queue-bound.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import { WriteQueue, WriteQueueFullError, type WriteQueueOptions } from '../../src/plants/write-queue.js';
import { SharedWrites, createInstanceMemory } from '../../src/workers/shared-memory.js';

const plants = (from: number, count: number): Plant[] =>
  Array.from({ length: count }, (_, index) => ({ id: BigInt(from + index), name: `p${from + index}`, tag: null }));

/** Records each transaction; answers every row created, except ids already stored (replayed or conflict, as stored), or refuses. */
class RecordingStore implements PlantStore {
  readonly transactions: Plant[][] = [];
  /** Per transaction, the traceparents the store was given (undefined: none). */
  readonly traceparents: Array<readonly (string | undefined)[] | undefined> = [];
  readonly stored = new Map<bigint, Plant>();
  committing = 0;
  mostAtOnce = 0;
  refuse: Error | undefined;

  async create(batch: readonly Plant[], traceparents?: readonly (string | undefined)[]): Promise<CreateOutcome[]> {
    this.traceparents.push(traceparents === undefined ? undefined : [...traceparents]);
    this.committing += 1;
    this.mostAtOnce = Math.max(this.mostAtOnce, this.committing);
    try {
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (this.refuse) throw this.refuse;
      this.transactions.push([...batch]);
      return batch.map((plant): CreateOutcome => {
        const stored = this.stored.get(plant.id);
        if (stored) return { kind: 'existing', stored };
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

/** The instance writer's queue: one batch committing at a time, as on SQLite. */
const writerQueue = (store: PlantStore, options: Partial<WriteQueueOptions> & { readonly batchLimit: number }) =>
  new WriteQueue(store, { queueLimit: 1000, concurrency: 1, ...options });

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

  describe('gathering', () => {
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
});

/** Every call waits until `release` (or `refuse`) is called; ids are created. */
class HeldStore implements PlantStore {
  readonly #held: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];

  get waiting(): number {
    return this.#held.length;
  }

  release(): void {
    for (const call of this.#held.splice(0)) call.resolve();
  }

  refuse(error: Error): void {
    for (const call of this.#held.splice(0)) call.reject(error);
  }

  #hold(): Promise<void> {
    return new Promise((resolve, reject) => this.#held.push({ resolve, reject }));
  }

  async create(plants: readonly Plant[]): Promise<CreateOutcome[]> {
    await this.#hold();
    return plants.map(() => ({ kind: 'created' }));
  }

  async delete(): Promise<boolean> {
    await this.#hold();
    return true;
  }

  get = () => Promise.resolve(undefined);
  list = () => Promise.resolve([]);
}

const plant = (id: number): Plant => ({ id: BigInt(id), name: `p${id}`, tag: null });
/** 'refused' when the write is refused at once (the queue full), 'admitted' when it is still waiting a turn later. */
const admission = (promise: Promise<unknown>) =>
  Promise.race([
    promise.then(
      () => 'answered',
      (error: unknown) => (error instanceof WriteQueueFullError ? 'refused' : `failed: ${String(error)}`),
    ),
    nextTurn().then(() => 'admitted'),
  ]);

function twoWorkers(queueLimit: number) {
  const memory = createInstanceMemory(2);
  const store = new HeldStore();
  const queue = (slot: number) => new WriteQueue(store, { queueLimit, batchLimit: 100, concurrency: 1, shared: new SharedWrites(memory, slot, queueLimit) });
  return { store, one: queue(0), two: queue(1) };
}

describe('write queues sharing an instance\'s bound', { timeout: 10_000 }, () => {
  it('refuses in either queue once both together hold WRITE_QUEUE_LIMIT writes, and takes again once a batch goes to storage', async () => {
    const { store, one, two } = twoWorkers(3);
    // A first batch from each queue goes to storage and is held there: it no longer waits in a queue.
    const first = [one.create(plant(1)), two.create(plant(2))];
    await nextTurn();
    assert.equal(store.waiting, 2);
    // Three more wait in the queues (each has its batch in flight); the fourth is over the instance's bound.
    const queued = [one.create(plant(3)), two.create(plant(4)), two.create(plant(5))];
    const over = await Promise.all([admission(one.create(plant(6))), admission(two.create(plant(7))), admission(two.delete(8n))]);
    assert.deepEqual(over, ['refused', 'refused', 'refused']);
    assert.deepEqual([one.depth, two.depth], [1, 2]);
    // The held batches commit; each queue hands its waiting creates to storage, which makes room in both.
    store.release();
    await Promise.all(first);
    await nextTurn();
    assert.equal(store.waiting, 2, 'the queued creates went to storage as one batch per queue');
    const later = one.create(plant(9));
    assert.equal(await admission(later), 'admitted', 'nothing else waits in a queue');
    store.release();
    await Promise.all(queued);
    await nextTurn();
    store.release();
    assert.deepEqual(await later, { kind: 'created' });
  });

  it('counts a delete against the bound until it is answered', async () => {
    const { store, one, two } = twoWorkers(1);
    const deleting = one.delete(1n);
    assert.equal(await admission(two.create(plant(2))), 'refused');
    store.release();
    assert.equal(await deleting, true);
    const created = two.create(plant(3));
    await nextTurn();
    store.release();
    assert.deepEqual(await created, { kind: 'created' });
  });

  it('reports a refusal by storage in every queue, and forgets it when a batch in any queue commits whole', async () => {
    const { store, one, two } = twoWorkers(10);
    const refused = one.create(plant(1));
    await nextTurn();
    store.refuse(new StorageUnavailableError('disk full'));
    await assert.rejects(refused, StorageUnavailableError);
    assert.deepEqual([one.refusedByStorageRecently, two.refusedByStorageRecently], [true, true]);
    const committed = two.create(plant(2));
    await nextTurn();
    store.release();
    await committed;
    assert.deepEqual([one.refusedByStorageRecently, two.refusedByStorageRecently], [false, false]);
  });
});
