/**
 * The write queue's bound (src/plants/write-bound.ts), with fake stores (no app, no database).
 *
 * One queue's bound alone: queued creates and deletes in flight count against one queueLimit, past which both are
 * refused with WriteQueueFullError; drain() waits for a delete in flight. The part of the bound kept for single
 * creates (reservedForSingles).
 *
 * Two workers' write queues on one instance's shared bound (WriteQueueOptions.shared): a create or a delete is refused
 * (WriteQueueFullError, answered 503) when the writes waiting in every queue together reach WRITE_QUEUE_LIMIT,
 * whichever queue holds them; a batch handed to storage, or a delete answered, makes room in any queue; a refusal by
 * storage in one queue makes every queue report it (readiness), until a batch commits whole. Their store holds each
 * call until the test lets it go.
 *
 * The bound answered over HTTP is in test/http/write-queue-bound.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { reservedForSingles, WriteQueueFullError } from '../../src/plants/write-bound.js';
import { WriteQueue } from '../../src/plants/write-queue.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import { SharedWrites, createInstanceMemory } from '../../src/workers/shared-memory.js';

/** A promise released by hand: storage "slowed" for exactly as long as a test needs. */
function gate(): { readonly opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('WriteQueue counts deletes and queued creates against one bound', () => {
  it('refuses creates and deletes once queued creates plus deletes reach queueLimit', async () => {
    const commit = gate();
    const write = gate();
    /** Deletes of id 10 wait for the gate; id 13 fails; the rest succeed at once. */
    const store = {
      create: async (plants: readonly Plant[]): Promise<CreateOutcome[]> => {
        await commit.opened;
        return plants.map(() => ({ kind: 'created' }));
      },
      delete: async (id: bigint): Promise<boolean> => {
        if (id === 10n) await write.opened;
        if (id === 13n) throw new Error('boom');
        return true;
      },
    } satisfies Pick<PlantStore, 'create' | 'delete'>;
    const writes = new WriteQueue(store, { queueLimit: 3, batchLimit: 100, concurrency: 1 });
    const plant = (id: bigint): Plant => ({ id, name: 'p', tag: null });
    // Two creates queued (nothing flushes before setImmediate) and one delete running: the bound is reached.
    const created = [writes.create(plant(1n)), writes.create(plant(2n))];
    const single = writes.delete(10n);
    assert.equal(writes.backlog, 3);
    await assert.rejects(writes.create(plant(3n)), (error) => error instanceof WriteQueueFullError);
    await assert.rejects(writes.delete(11n), (error) => error instanceof WriteQueueFullError && /write queue is full/.test(error.message));
    let idle = false;
    const idled = writes.drain().then(() => (idle = true));
    // Once the queued creates are in a committing batch they no longer wait, as before: the bound has room again.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(await writes.delete(12n), true);
    commit.open();
    assert.deepEqual(await Promise.all(created), [{ kind: 'created' }, { kind: 'created' }]);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(idle, false, 'drain() still waits for the delete');
    write.open();
    assert.equal(await single, true);
    await idled;
    assert.equal(writes.backlog, 0);
    // A failing delete is released from the count and its error passed on.
    await assert.rejects(writes.delete(13n), /boom/);
    assert.equal(writes.backlog, 0);
  });
});

describe('the part of the bound kept for single creates', () => {
  it('keeps a quarter of the bound for single creates', () => {
    assert.equal(reservedForSingles(10_000), 2500);
    assert.equal(reservedForSingles(8), 2);
    assert.equal(reservedForSingles(2), 1);
    assert.equal(reservedForSingles(1), 0);
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
