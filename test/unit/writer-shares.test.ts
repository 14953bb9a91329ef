/**
 * The write queue's space shared among writers under contention (src/plants/writer-shares.ts), with fake stores (no
 * app, no database): the pure rule (overShare), the count per writer (WriterShares), and a WriteQueue refusing the
 * single creates of a writer over its share while one under its share is admitted up to the bound, and a writer
 * alone never refused below the bound. Answered over HTTP in test/http/write-queue-bound.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { WriteQueueFullError } from '../../src/plants/write-bound.js';
import { WriteQueue } from '../../src/plants/write-queue.js';
import { overShare, SHARING_FROM, WriterShares } from '../../src/plants/writer-shares.js';
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import { createInstanceMemory, SharedWrites } from '../../src/workers/shared-memory.js';

const plant = (id: number): Plant => ({ id: BigInt(id), name: 'p', tag: null });

/** A store whose commits wait until the test opens it. */
function heldStore(): { store: Pick<PlantStore, 'create' | 'delete'>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const store = {
    create: async (plants: readonly Plant[]): Promise<CreateOutcome[]> => {
      await opened;
      return plants.map(() => ({ kind: 'created' }));
    },
    delete: async (): Promise<boolean> => true,
  };
  return { store, open };
}

/** Creates `count` plants as `writer` in one turn; resolves with how many were admitted (not refused at once). */
async function burst(writes: WriteQueue, writer: string | undefined, from: number, count: number): Promise<{ admitted: number; settled: Promise<unknown> }> {
  const refused: boolean[] = [];
  const all = Array.from({ length: count }, (_, index) =>
    writes.create(plant(from + index), undefined, writer).then(
      () => undefined,
      (error: unknown) => {
        assert.ok(error instanceof WriteQueueFullError);
        refused.push(true);
      },
    ),
  );
  await nextTurn();
  await nextTurn();
  return { admitted: count - refused.length, settled: Promise.all(all) };
}

describe('overShare: the sharing rule', () => {
  it('never refuses below SHARING_FROM of the bound, however much a writer holds', () => {
    const below = Math.ceil(100 * SHARING_FROM) - 1;
    assert.equal(overShare(below, 100, below, 2), false);
    assert.equal(overShare(below, 100, 40, 10), false);
  });

  it('past it refuses a writer at or over queueLimit ÷ writers, and admits one under it', () => {
    assert.equal(overShare(60, 100, 50, 2), true);
    assert.equal(overShare(60, 100, 49, 2), false);
    assert.equal(overShare(99, 100, 10, 2), false);
    assert.equal(overShare(60, 100, 25, 4), true);
    assert.equal(overShare(60, 100, 24, 4), false);
  });

  it('never refuses a writer holding nothing', () => {
    assert.equal(overShare(99, 100, 0, 1000), false);
  });
});

describe('WriterShares: writes queued per writer', () => {
  it('admits a writer alone whatever it holds, and counts writers leaving as their writes leave', () => {
    const shares = new WriterShares(10);
    for (let index = 0; index < 9; index += 1) shares.add('a');
    assert.equal(shares.allows('a', () => 9), true, 'alone, a writer is held by the bound only');
    shares.add('b');
    assert.equal(shares.writers, 2);
    assert.equal(shares.allows('a', () => 10), false, 'nine of ten, beside another writer');
    assert.equal(shares.allows('b', () => 10), true);
    assert.equal(shares.allows('c', () => 10), true, 'a writer with nothing queued is under its share');
    shares.remove('b');
    assert.equal(shares.writers, 1);
    assert.equal(shares.allows('a', () => 10), true);
    for (let index = 0; index < 9; index += 1) shares.remove('a');
    assert.equal(shares.writers, 0);
    shares.remove('a');
    assert.equal(shares.writers, 0, 'removing what is not there counts nothing');
  });

  it('asks how full the queue is only under contention', () => {
    const shares = new WriterShares(10);
    let asked = 0;
    const depth = () => {
      asked += 1;
      return 9;
    };
    shares.add('a');
    shares.allows('a', depth);
    shares.allows('b', depth);
    assert.equal(asked, 0);
    shares.add('b');
    shares.allows('a', depth);
    assert.equal(asked, 1);
  });
});

describe('WriteQueue shares its space among writers under contention', () => {
  it('admits a writer alone up to the bound', async () => {
    const { store, open } = heldStore();
    const writes = new WriteQueue(store, { queueLimit: 10, batchLimit: 100, concurrency: 1 });
    // The first create commits (held): the queue is empty again, and what follows waits in it.
    const plug = writes.create(plant(1), undefined, 'other');
    await nextTurn();
    const alone = await burst(writes, 'heavy', 100, 30);
    assert.equal(alone.admitted, 10);
    open();
    await Promise.all([plug, alone.settled]);
  });

  it('refuses a writer over its share while one under it is admitted up to the bound, and admits it again once its writes left', async () => {
    const { store, open } = heldStore();
    const writes = new WriteQueue(store, { queueLimit: 10, batchLimit: 100, concurrency: 1 });
    const plug = writes.create(plant(1), undefined, 'other');
    await nextTurn();
    const light = await burst(writes, 'light', 10, 1);
    assert.equal(light.admitted, 1);
    // Half the bound is reached at depth 5; past it the heavy writer may hold no more than 10 ÷ 2.
    const heavy = await burst(writes, 'heavy', 100, 30);
    assert.equal(heavy.admitted, 5);
    assert.equal(writes.depth, 6);
    // The light writer is under its share: admitted until the bound, which refuses it too.
    const lightAgain = await burst(writes, 'light', 20, 10);
    assert.equal(lightAgain.admitted, 4);
    assert.equal(writes.depth, 10);
    open();
    await Promise.all([plug, light.settled, heavy.settled, lightAgain.settled]);
    await nextTurn();
    assert.equal(writes.depth, 0);
    const later = await burst(writes, 'heavy', 200, 3);
    assert.equal(later.admitted, 3, 'its writes left the queue: nothing counts against it');
    await later.settled;
  });

  it('applies the rule to the instance\'s depth when threads share the bound, with each thread\'s own writers', async () => {
    const memory = createInstanceMemory(2);
    const first = heldStore();
    const second = heldStore();
    const options = { queueLimit: 20, batchLimit: 100, concurrency: 1 };
    const one = new WriteQueue(first.store, { ...options, shared: new SharedWrites(memory, 0, 20) });
    const two = new WriteQueue(second.store, { ...options, shared: new SharedWrites(memory, 1, 20) });
    const plugs = [one.create(plant(1), undefined, 'x'), two.create(plant(2), undefined, 'x')];
    await nextTurn();
    // The other thread's queue holds 8 of one writer alone there; this one 2 of two light writers: half the bound.
    const elsewhere = await burst(two, 'heavy', 50, 8);
    const lights = [await burst(one, 'light-1', 10, 1), await burst(one, 'light-2', 20, 1)];
    assert.deepEqual([elsewhere.admitted, lights[0]?.admitted, lights[1]?.admitted], [8, 1, 1]);
    // Here three writers share 20: the heavy one is refused at 7, with the instance at 17, short of its bound.
    const heavy = await burst(one, 'heavy', 100, 30);
    assert.equal(heavy.admitted, 7);
    assert.equal(one.depth + two.depth, 17);
    first.open();
    second.open();
    await Promise.all([...plugs, elsewhere.settled, heavy.settled, ...lights.map((light) => light.settled)]);
  });
});
