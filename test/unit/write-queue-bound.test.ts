/**
 * WriteQueue's bound alone, with a fake store (no app, no database): queued creates and deletes in flight count
 * against one queueLimit, past which both are refused with WriteQueueFullError; drain() waits for a delete in flight.
 * The bound answered over HTTP is in test/http/write-queue-bound.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WriteQueue, WriteQueueFullError } from '../../src/plants/write-queue.js';
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';

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
