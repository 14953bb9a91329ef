/**
 * Deletes count against the same write-queue bound as creates (WRITE_QUEUE_LIMIT): a flood of DELETEs is refused
 * with 503 + Retry-After past the bound instead of queueing in front of storage without limit, creates see the
 * deletes in the count (and deletes see the creates), and graceful shutdown's idle() waits for a delete in flight.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { WriteQueue, WriteQueueFullError } from '../../src/plants/write-queue.js';
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plants/plant.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { DATABASES, type TestDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

stopPostgresAfterAll();

const LIMIT = 5;

/** A promise released by hand: storage "slowed" for exactly as long as a test needs. */
function gate(): { readonly opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

function assertQueueFull(response: LightMyRequestResponse): void {
  assertErrorRecord(response, 503, /^the write queue is full; retry shortly$/);
  assert.match(String(response.headers['retry-after']), /^[1-9]\d*$/);
}

for (const database of DATABASES) {
  describe(`deletes under WRITE_QUEUE_LIMIT on ${database.kind}`, () => {
    let db: TestDatabase;
    let t: TestApp;
    let deletePlant: PlantStore['delete'];
    const post = (id: number) =>
      t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: `{"id":${id},"name":"Flood","tag":"del"}` });
    const del = (id: number) =>
      t.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: { authorization: t.headers.authorization as string } });
    /** Every store delete waits for the gate before it reaches storage. */
    function slowDeletes(): { open(): void } {
      const held = gate();
      t.store.plants.delete = async (id) => {
        await held.opened;
        return deletePlant(id);
      };
      return held;
    }

    before(async () => {
      db = await database.create();
      t = await startTestApp(db.url, { WRITE_QUEUE_LIMIT: String(LIMIT) });
      const original = t.store.plants.delete;
      deletePlant = original.bind(t.store.plants);
    });
    afterEach(() => {
      t.store.plants.delete = deletePlant;
    });
    after(async () => {
      await t?.close();
      await db?.cleanup();
    });

    it('refuses a DELETE flood past the bound with 503 + Retry-After, never 500, and refuses creates meanwhile', async () => {
      const PRESENT = 20;
      const FLOOD = 40;
      for (let id = 1; id <= PRESENT; id += 1) assert.equal((await post(id)).statusCode, 200);
      const held = slowDeletes();
      let answered = 0;
      // Ids 1..20 are stored, 21..40 are not: accepted deletes answer 204 or 404.
      const flood = Array.from({ length: FLOOD }, (_, index) =>
        del(index + 1).then((response) => {
          answered += 1;
          return response;
        }),
      );
      // Storage is held: exactly LIMIT deletes are admitted, every other one is refused at once, before any commits.
      await waitFor('the refused deletes to be answered', () => answered === FLOOD - LIMIT, { intervalMs: 2 });
      assert.equal(t.services.writes.backlog, LIMIT);
      // Creates see the deletes in the count, and further deletes are still refused.
      assertQueueFull(await post(1000));
      assertQueueFull(await del(1));
      assert.equal(await t.store.plants.get(1000n), undefined, 'the refused create is not stored');
      held.open();
      const responses = await Promise.all(flood);

      const byStatus = new Map<number, number>();
      for (const response of responses) byStatus.set(response.statusCode, (byStatus.get(response.statusCode) ?? 0) + 1);
      assert.deepEqual([...byStatus.keys()].filter((status) => ![204, 404, 503].includes(status)), [], JSON.stringify([...byStatus]));
      assert.equal(byStatus.get(503), FLOOD - LIMIT, JSON.stringify([...byStatus]));
      for (const [index, response] of responses.entries()) {
        const id = index + 1;
        const stored = await t.store.plants.get(BigInt(id));
        if (response.statusCode === 503) {
          assertQueueFull(response);
          if (id <= PRESENT) assert.ok(stored, `refused delete of ${id} left it stored`);
        } else if (response.statusCode === 204) {
          assert.ok(id <= PRESENT, `204 only for a stored id, not ${id}`);
          assert.equal(response.body, '');
          assert.equal(stored, undefined, `deleted ${id} is gone`);
        } else {
          assert.ok(id > PRESENT, `404 only for an absent id, not ${id}`);
          assertErrorRecord(response, 404, new RegExp(`^no plant with id ${id}$`));
        }
      }
      assert.equal(t.services.writes.backlog, 0, 'nothing is left queued');

      // After the flood, deletes and creates are taken again.
      t.store.plants.delete = deletePlant;
      const survivor = [...Array(PRESENT).keys()].map((index) => index + 1).find((_, index) => responses[index]?.statusCode === 503);
      assert.ok(survivor !== undefined);
      assert.equal((await del(survivor)).statusCode, 204);
      assert.equal(await t.store.plants.get(BigInt(survivor)), undefined);
      assertErrorRecord(await del(survivor), 404);
      assert.equal((await post(1000)).statusCode, 200);
      assert.equal((await del(1000)).statusCode, 204);
      // A concurrent burst within the bound is taken whole.
      for (let id = 2000; id < 2000 + LIMIT; id += 1) assert.equal((await post(id)).statusCode, 200);
      const burst = await Promise.all(Array.from({ length: LIMIT }, (_, index) => del(2000 + index)));
      assert.deepEqual(burst.map((response) => response.statusCode), Array(LIMIT).fill(204));
      assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    });

    it('with slow storage, concurrent deletes and creates get only 204/404/200/503, never 500', async () => {
      for (let id = 3000; id < 3010; id += 1) assert.equal((await post(id)).statusCode, 200);
      t.store.plants.delete = async (id) => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return deletePlant(id);
      };
      const responses = await Promise.all([
        ...Array.from({ length: 60 }, (_, index) => del(3000 + (index % 20))),
        ...Array.from({ length: 20 }, (_, index) => post(4000 + index)),
      ]);
      const statuses = new Set(responses.map((response) => response.statusCode));
      assert.deepEqual([...statuses].filter((status) => ![200, 204, 404, 503].includes(status)), [], JSON.stringify([...statuses]));
      assert.ok(statuses.has(503), 'some writes are refused');
      for (const response of responses) if (response.statusCode === 503) assertQueueFull(response);
      assert.equal(t.services.writes.backlog, 0);
    });

    it('services.writes.drain() (graceful shutdown) waits for a delete in flight, committed before the 204', async () => {
      assert.equal((await post(5000)).statusCode, 200);
      const held = slowDeletes();
      const pending = del(5000);
      await waitFor('the delete to be admitted', () => t.services.writes.backlog === 1, { intervalMs: 2 });
      let idle = false;
      const idled = t.services.writes.drain().then(() => (idle = true));
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(idle, false, 'idle() waits while the delete is held');
      held.open();
      await idled;
      assert.equal(await t.store.plants.get(5000n), undefined, 'committed by the time idle() resolves');
      assert.equal((await pending).statusCode, 204);
      assert.equal(t.services.writes.backlog, 0);
    });
  });
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
    } as unknown as PlantStore;
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
