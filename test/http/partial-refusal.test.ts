/**
 * A batch of creates that storage commits only in part (PostgreSQL: a later statement of the batch failed after the
 * first committed, so the rest were answered 503) counts as refused for /readyz, just like a batch refused whole: the
 * rows committed first must not make the instance look healthy while storage is refusing the rest.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { WriteQueue } from '../../src/plants/write-queue.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import { useTestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { sqliteDatabase } from '../helpers/databases.js';

const plant = (id: bigint): Plant => ({ id, name: 'p', tag: null });

/** A plant store answering each batch with `answer`, as PostgreSQL's create answers a batch it was cut short in. */
function storeAnswering(answer: (plants: readonly Plant[]) => CreateOutcome[] | Promise<CreateOutcome[]>): Pick<PlantStore, 'create' | 'delete'> {
  return { create: async (plants) => answer(plants), delete: () => Promise.reject(new Error('no delete in these tests')) };
}

const cutShort = (): CreateOutcome => ({ kind: 'failed', error: new StorageUnavailableError('storage is unavailable; retry shortly') });

describe('WriteQueue: a batch refused in part', () => {
  it('a batch whose first rows committed and whose rest were refused with 503 marks storage as refusing', async () => {
    const writes = new WriteQueue(
      storeAnswering((plants) => plants.map((_, index) => (index === 0 ? { kind: 'created' } : cutShort()))),
      { queueLimit: 10, batchLimit: 10, concurrency: 1 },
    );
    const outcomes = await Promise.all([writes.create(plant(1n)), writes.create(plant(2n))]);
    assert.deepEqual(
      outcomes.map((outcome) => outcome.kind),
      ['created', 'failed'],
      'both creates shared one batch',
    );
    assert.equal(writes.refusedByStorageRecently, true);
  });

  it('a partly refused batch after a wholly refused one keeps the refusal; a batch committed whole clears it', async () => {
    let answer: 'refuse' | 'cut short' | 'commit' = 'refuse';
    const writes = new WriteQueue(
      storeAnswering((plants) => {
        if (answer === 'refuse') throw new StorageUnavailableError('storage is unavailable; retry shortly');
        return plants.map((_, index) => (answer === 'cut short' && index > 0 ? cutShort() : { kind: 'created' }));
      }),
      { queueLimit: 10, batchLimit: 10, concurrency: 1 },
    );
    await assert.rejects(writes.create(plant(1n)), StorageUnavailableError);
    assert.equal(writes.refusedByStorageRecently, true);
    answer = 'cut short';
    await Promise.all([writes.create(plant(2n)), writes.create(plant(3n))]);
    assert.equal(writes.refusedByStorageRecently, true, 'the committed first row did not clear the refusal');
    answer = 'commit';
    await Promise.all([writes.create(plant(4n)), writes.create(plant(5n))]);
    assert.equal(writes.refusedByStorageRecently, false);
  });

  it('a row failing on its own (a constraint, not storage) does not mark storage as refusing', async () => {
    const writes = new WriteQueue(
      storeAnswering((plants) => plants.map((_, index) => (index === 0 ? { kind: 'created' } : { kind: 'failed', error: new Error('CHECK constraint failed') }))),
      { queueLimit: 10, batchLimit: 10, concurrency: 1 },
    );
    await Promise.all([writes.create(plant(1n)), writes.create(plant(2n))]);
    assert.equal(writes.refusedByStorageRecently, false);
  });
});

describe('/readyz after a batch storage refused in part', () => {
  const t = useTestApp(sqliteDatabase);
  /** Ids from this one on are refused after the batch's earlier rows committed, as on a PostgreSQL batch cut short. */
  const FIRST_REFUSED_ID = 100n;

  before(async () => {
    const { store } = t;
    const commit = store.plants.create.bind(store.plants);
    store.plants.create = async (plants) => {
      const committed = await commit(plants.filter((candidate) => candidate.id < FIRST_REFUSED_ID));
      let next = 0;
      return plants.map((candidate) => (candidate.id < FIRST_REFUSED_ID ? (committed[next++] as CreateOutcome) : cutShort()));
    };
  });

  const create = (id: bigint) =>
    t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: `{"id":${id},"name":"Fern"}` });

  it('answers 503 while the latest batch was refused in part, and 200 once one commits whole', async () => {
    assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready before');
    const [committed, refused] = await Promise.all([create(1n), create(FIRST_REFUSED_ID)]);
    assert.equal(committed.statusCode, 200, committed.body);
    assertErrorRecord(refused, 503);
    assertErrorRecord(await t.app.inject({ method: 'GET', url: '/readyz' }), 503);

    assert.equal((await create(2n)).statusCode, 200);
    assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready again');
  });
});
