/**
 * The write queue's lanes (src/plants/write-lanes.ts) alone, with a fake store whose commits are released by hand
 * (no app, no database): a stream that finds the queue full waits for room instead of being refused, streams share
 * the queue fairly, leaving single creates their part of the bound (test/unit/write-bound.test.ts), which go first
 * in every batch, and a closed lane gives its place back. The lanes used by a real stream are in
 * test/http/bulk-create.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WriteQueueFullError } from '../../src/plants/write-bound.js';
import type { WriteLane } from '../../src/plants/write-lanes.js';
import { WriteQueue } from '../../src/plants/write-queue.js';
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';

/** A store whose every commit waits to be released, recording the ids of each batch. */
function heldStore() {
  const batches: bigint[][] = [];
  const waiting: Array<() => void> = [];
  const store = {
    create: async (plants: readonly Plant[]): Promise<CreateOutcome[]> => {
      batches.push(plants.map((plant) => plant.id));
      await new Promise<void>((resolve) => waiting.push(resolve));
      return plants.map(() => ({ kind: 'created' }));
    },
    delete: async () => true,
  } satisfies Pick<PlantStore, 'create' | 'delete'>;
  return {
    store,
    batches,
    /** Releases the commit in progress. */
    commit: () => waiting.shift()?.(),
  };
}

const plant = (id: number): Plant => ({ id: BigInt(id), name: 'p', tag: null });
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** Creates through `lane` for as long as it is granted places at once; how many it got, and its wait for the next. */
function fill(writes: WriteQueue, lane: WriteLane, firstId: number): { created: Array<Promise<CreateOutcome>>; count: number; next: Promise<boolean> } {
  const created: Array<Promise<CreateOutcome>> = [];
  for (;;) {
    const waiting = lane.reserve();
    if (waiting !== undefined) return { created, count: created.length, next: waiting };
    created.push(writes.create(plant(firstId + created.length), lane));
  }
}

describe('WriteQueue lanes', () => {
  it('makes a stream wait for room instead of refusing it, and grants the room once a batch goes to storage', async () => {
    const held = heldStore();
    const writes = new WriteQueue(held.store, { queueLimit: 8, batchLimit: 100, concurrency: 1 });
    const lane = writes.openLane();
    // Streams may take 8 − 2 places; the seventh waits.
    const first = fill(writes, lane, 1);
    assert.equal(first.count, 6);
    let granted: boolean | undefined;
    void first.next.then((value) => (granted = value));
    // The reserve is still there for single creates, and past it they are refused as before.
    const singles = [writes.create(plant(100)), writes.create(plant(101))];
    await assert.rejects(writes.create(plant(102)), WriteQueueFullError);
    await turn();
    // The batch went to storage: its places are free, and the waiting stream got one.
    assert.equal(granted, true);
    assert.deepEqual(held.batches[0], [100n, 101n, 1n, 2n, 3n, 4n, 5n, 6n], 'single creates first in the batch');
    const next = writes.create(plant(7), lane);
    held.commit();
    await Promise.all([...first.created, ...singles]);
    await turn();
    held.commit();
    assert.deepEqual(await next, { kind: 'created' });
    lane.close();
    await writes.drain();
  });

  it('divides the streams part of the bound among open lanes, and grants waiting lanes in turn', async () => {
    const held = heldStore();
    const writes = new WriteQueue(held.store, { queueLimit: 16, batchLimit: 4, concurrency: 1 });
    const a = writes.openLane();
    const b = writes.openLane();
    // 12 places for streams, 6 each: a cannot take b's half.
    const fromA = fill(writes, a, 1000);
    assert.equal(fromA.count, 6);
    const fromB = fill(writes, b, 2000);
    assert.equal(fromB.count, 6);
    // Both wait; batches of 4 go to storage one at a time, and each frees places that go to the lanes in turn.
    const grants: string[] = [];
    void fromA.next.then(() => grants.push('a'));
    void fromB.next.then(() => grants.push('b'));
    await turn();
    assert.deepEqual(held.batches[0], [1000n, 1001n, 1002n, 1003n]);
    assert.deepEqual(grants, ['a'], 'a got a place as its lines went to storage');
    held.commit();
    await turn();
    await turn();
    assert.deepEqual(held.batches[1], [1004n, 1005n, 2000n, 2001n]);
    assert.deepEqual(grants, ['a', 'b']);
    // A closed lane gives its held place back and its share to the other.
    a.close();
    assert.equal(a.reserve() instanceof Promise, true);
    assert.equal(await a.reserve(), false);
    for (let commits = 0; commits < 10 && writes.backlog > 0; commits += 1) {
      held.commit();
      await turn();
    }
    b.close();
    await Promise.all([...fromA.created, ...fromB.created]);
    await writes.drain();
  });

  it('ends a wait with false when the lane is closed', async () => {
    const held = heldStore();
    const writes = new WriteQueue(held.store, { queueLimit: 4, batchLimit: 100, concurrency: 1 });
    const lane = writes.openLane();
    const { created, next } = fill(writes, lane, 1);
    lane.close();
    assert.equal(await next, false);
    await turn();
    held.commit();
    await Promise.all(created);
    await writes.drain();
  });
});
