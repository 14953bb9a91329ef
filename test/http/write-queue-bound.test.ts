/**
 * The write queue's bound (WRITE_QUEUE_LIMIT) answered by the app in-process: creates past it are refused with 503 +
 * Retry-After and are not stored; deletes count against the same bound as creates, so a flood of DELETEs is refused
 * past it instead of queueing in front of storage without limit, creates see the deletes in the count (and deletes see
 * the creates), and graceful shutdown's idle() waits for a delete in flight. WriteQueue's bound alone is in
 * test/unit/write-queue-bound.test.ts; a burst against a real process in test/process/write-queue-bound.test.ts.
 * Under contention the queue is shared among client addresses: a heavy client is refused while a light one is
 * admitted, and a client alone is refused only at the bound (the rule alone: test/unit/writer-shares.test.ts).
 */
import assert from 'node:assert/strict';
import { afterEach, before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { PlantStore } from '../../src/storage/plant-store.js';
import { useTestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { DATABASES, sqliteDatabase } from '../helpers/databases.js';
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

describe('the bounded write queue', () => {
  let nextId = 1;
  const plant = () => `{"id":${nextId++},"name":"Burst","tag":"load"}`;
  const t = useTestApp(sqliteDatabase, { WRITE_QUEUE_LIMIT: '5' });

  it('refuses creates past WRITE_QUEUE_LIMIT with 503, Retry-After and an Error record, never 500, and stays healthy', async () => {
    const bodies = Array.from({ length: 300 }, plant);
    const responses = await Promise.all(
      bodies.map((payload) => t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload })),
    );
    const byStatus = new Map<number, number>();
    for (const response of responses) byStatus.set(response.statusCode, (byStatus.get(response.statusCode) ?? 0) + 1);
    assert.deepEqual([...byStatus.keys()].filter((status) => status !== 200 && status !== 503), [], JSON.stringify([...byStatus]));
    assert.ok((byStatus.get(503) ?? 0) > 0, `some creates are refused: ${JSON.stringify([...byStatus])}`);
    assert.ok((byStatus.get(200) ?? 0) > 0, `some creates are stored: ${JSON.stringify([...byStatus])}`);
    for (const [index, response] of responses.entries()) {
      if (response.statusCode === 503) {
        assertErrorRecord(response, 503, /write queue is full/);
        assert.match(String(response.headers['retry-after']), /^[1-9]\d*$/);
      } else {
        // What was answered 200 is stored; what was refused is not.
        assert.equal(response.statusCode, 200);
        const id = BigInt((JSON.parse(bodies[index] as string) as { id: number }).id);
        assert.ok(await t.store.plants.get(id), `created ${id} is stored`);
      }
    }
    // Refused creates are not stored, so a retry creates them.
    const refused = responses.findIndex((response) => response.statusCode === 503);
    const retry = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: bodies[refused] });
    assert.equal(retry.statusCode, 200);
    assert.equal((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
    assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    assert.equal(t.services.writes.backlog, 0, 'nothing is left queued');
  });
});

describe('the write queue shared among client addresses', () => {
  const t = useTestApp(sqliteDatabase, { WRITE_QUEUE_LIMIT: '10' });
  let nextId = 1;
  let createPlants: PlantStore['create'];
  before(() => {
    createPlants = t.store.plants.create.bind(t.store.plants);
  });
  afterEach(() => {
    t.store.plants.create = createPlants;
  });

  /**
   * Holds commits until opened; resolves once as many as the store commits at once are committing (plugs, of another
   * address), so that what follows waits in the queue.
   */
  async function holdCommits(): Promise<{ open(): void; plugged: Promise<LightMyRequestResponse[]> }> {
    const held = gate();
    let committing = 0;
    t.store.plants.create = async (...args) => {
      committing += 1;
      await held.opened;
      return createPlants(...args);
    };
    const plugs: Promise<LightMyRequestResponse>[] = [];
    for (let plug = 1; plug <= t.store.writeConcurrency; plug += 1) {
      plugs.push(...creates('10.9.9.9', 1));
      await waitFor('the plug to be committing', () => committing === plug, { intervalMs: 2 });
    }
    return { open: held.open, plugged: Promise.all(plugs) };
  }

  function creates(remoteAddress: string, count: number): Promise<LightMyRequestResponse>[] {
    return Array.from({ length: count }, () =>
      t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, remoteAddress, payload: `{"id":${nextId++},"name":"Share","tag":"share"}` }),
    );
  }

  /** Sends `count` creates from `remoteAddress`; resolves once those refused at once have been answered. */
  async function burst(remoteAddress: string, count: number): Promise<{ refused: number; all: Promise<LightMyRequestResponse[]> }> {
    let refused = 0;
    const all = creates(remoteAddress, count).map((response) =>
      response.then((answered) => {
        if (answered.statusCode === 503) refused += 1;
        return answered;
      }),
    );
    const depth = t.services.writes.depth;
    await waitFor('the burst to be admitted or refused', () => t.services.writes.depth + refused === depth + count, { intervalMs: 2 });
    return { refused, all: Promise.all(all) };
  }

  it('refuses a client over its share under contention while one under it is admitted up to the bound', async () => {
    const { open, plugged } = await holdCommits();
    let light, heavy, lightAgain;
    try {
      light = await burst('127.0.0.2', 1);
      heavy = await burst('127.0.0.3', 30);
      // Past half of the bound, two clients' share is 5 each.
      assert.equal(heavy.refused, 25);
      lightAgain = await burst('127.0.0.2', 10);
      assert.equal(lightAgain.refused, 6, 'the light client is admitted until the bound');
    } finally {
      open();
    }
    const answered = [...(await plugged), ...(await light.all), ...(await heavy.all), ...(await lightAgain.all)];
    for (const response of answered) if (response.statusCode !== 200) assertQueueFull(response);
    assert.equal(answered.filter((response) => response.statusCode === 200).length, 10 + t.store.writeConcurrency);
  });

  it('refuses a client alone only at the bound', async () => {
    const { open, plugged } = await holdCommits();
    let alone;
    try {
      alone = await burst('127.0.0.3', 30);
      assert.equal(alone.refused, 20);
    } finally {
      open();
    }
    await plugged;
    const answered = await alone.all;
    assert.equal(answered.filter((response) => response.statusCode === 200).length, 10);
  });
});

for (const database of DATABASES) {
  describe(`deletes under WRITE_QUEUE_LIMIT on ${database.kind}`, () => {
    const t = useTestApp(database.create, { WRITE_QUEUE_LIMIT: String(LIMIT) });
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

    before(() => {
      const original = t.store.plants.delete;
      deletePlant = original.bind(t.store.plants);
    });
    afterEach(() => {
      t.store.plants.delete = deletePlant;
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
