/**
 * The SQLite store's durability off the event loop (src/storage/sqlite/wal-sync.ts, docs/design/sqlite.md): the
 * write connection commits with synchronous=NORMAL and the WAL is fdatasync'd apart, so
 * every answer must wait for a sync that began after the commit it depends on. The store is opened with a sync the
 * test holds and lets go (or fails) by hand, so each test sees exactly what waits for which sync:
 *   - a create, a replay, a conflict, a delete and the heartbeat are answered only once a sync covering their commit
 *     has returned; a sync that began before a commit does not answer it;
 *   - a read (get, list; on the writer's thread and through a worker thread's store, which reads the durable mark in
 *     shared memory) shows nothing whose sync has not returned;
 *   - the write queue commits the next batch when the sync in flight returns, all of it in one transaction, and wakes
 *     the webhook dispatcher only after the sync;
 *   - a failed sync refuses every answer it was to cover and everything after (503), and so does the WAL removed
 *     under the store.
 * "Still waiting" is checked after several event-loop turns: an answer that waits for a held sync cannot come however
 * long one waits, so no bound on time is involved.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { LoopLoad } from '../../src/storage/sqlite/loop-load.js';
import { WriteQueue } from '../../src/plants/write-queue.js';
import type { Plant } from '../../src/plant.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import type { StorageIncident } from '../../src/storage/store.js';
import type { NewToken } from '../../src/storage/token-store.js';
import { pragmaValue } from '../../src/storage/sqlite/connection.js';
import { DelegatingSqliteStore } from '../../src/storage/sqlite/delegating-store.js';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store.js';
import { QUICK_SYNCS_BEFORE_LOOP, SyncPlacement } from '../../src/storage/sqlite/sync-placement.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { sqliteFile } from '../helpers/transfer.js';

/** A sync the test controls: each call waits until the test lets it return (or fail). */
class HeldSync {
  readonly #pending: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];
  /** Syncs started so far. */
  started = 0;
  /** While false, every sync returns at once (as a real one would, after really syncing). */
  holding = true;

  readonly sync = (fd: number): Promise<void> => {
    this.started += 1;
    if (!this.holding) return new Promise((resolve, reject) => fs.fdatasync(fd, (error) => (error ? reject(error) : resolve())));
    return new Promise((resolve, reject) => this.#pending.push({ resolve, reject }));
  };

  get waiting(): number {
    return this.#pending.length;
  }

  /** Lets the oldest sync in flight return. */
  release(): void {
    const next = this.#pending.shift();
    assert.ok(next, 'a sync is in flight');
    next.resolve();
  }

  fail(error: Error): void {
    const next = this.#pending.shift();
    assert.ok(next, 'a sync is in flight');
    next.reject(error);
  }
}

/** Tracks whether a promise has settled, without letting a rejection go unhandled. */
function watch<T>(promise: Promise<T>): { readonly settled: () => boolean; readonly promise: Promise<T> } {
  let settled = false;
  const tracked = promise.finally(() => {
    settled = true;
  });
  tracked.catch(() => undefined);
  return { settled: () => settled, promise: tracked };
}

/** Lets the event loop turn several times: whatever could run without the held sync has run. */
async function turns(count = 10): Promise<void> {
  for (let index = 0; index < count; index += 1) await nextTurn();
}

const plant = (id: bigint, name = 'fern'): Plant => ({ id, name, tag: null });

describe('SQLite durability off the event loop', () => {
  let database: TestDatabase;
  let file: string;
  let held: HeldSync;
  let store: SqliteStore;
  let incidents: StorageIncident[];

  beforeEach(async () => {
    database = await sqliteDatabase();
    file = sqliteFile(database.url);
    held = new HeldSync();
    store = SqliteStore.open(file, { sync: held.sync });
    incidents = [];
    store.onIncident((incident) => incidents.push(incident));
  });
  afterEach(async () => {
    held.holding = false;
    while (held.waiting > 0) held.release();
    await store.close();
    await database.cleanup();
  });

  it('commits on a write connection with synchronous=NORMAL, the sync being the store\'s own', async () => {
    // The store's connections are private; a write and its sync show it: the commit is visible to another
    // connection before the store answers it, which synchronous=FULL would not allow.
    const created = watch(store.plants.create([plant(1n)]));
    await turns();
    assert.equal(held.waiting, 1, 'one sync in flight for the commit');
    assert.equal(created.settled(), false, 'not answered before its sync returned');
    const { openDatabase } = await import('../../src/storage/sqlite/connection.js');
    const other = openDatabase(file, { readOnly: true });
    try {
      assert.equal(pragmaValue(other, 'journal_mode'), 'wal');
      assert.equal(other.prepare('SELECT count(*) AS n FROM plants').get()?.n, 1, 'committed into the WAL before the sync');
    } finally {
      other.close();
    }
    held.release();
    assert.deepEqual(await created.promise, [{ kind: 'created' }]);
  });

  it('answers a create, a replay, a conflict, a delete and the heartbeat only after a sync covering their commit', async () => {
    held.holding = false;
    await store.plants.create([plant(10n), plant(11n)]);
    held.holding = true;
    const writes = {
      created: watch(store.plants.create([plant(12n)])),
      replayed: watch(store.plants.create([plant(10n)])),
      conflict: watch(store.plants.create([plant(11n, 'other name')])),
      deleted: watch(store.plants.delete(10n)),
      heartbeat: watch(store.checkWritable()),
    };
    await turns();
    for (const [name, write] of Object.entries(writes)) assert.equal(write.settled(), false, `${name} waits for its sync`);
    // The first sync began after the first commit only: writes made while it ran wait for the next one.
    while (held.waiting > 0 || Object.values(writes).some((write) => !write.settled())) {
      if (held.waiting > 0) held.release();
      await turns(2);
    }
    assert.deepEqual(await writes.created.promise, [{ kind: 'created' }]);
    // Storage reports the row it found; whether that is a replay or a conflict is the domain's decision (isSamePlant).
    assert.deepEqual(await writes.replayed.promise, [{ kind: 'existing', stored: plant(10n) }]);
    assert.deepEqual(await writes.conflict.promise, [{ kind: 'existing', stored: plant(11n) }]);
    assert.equal(await writes.deleted.promise, true);
    await writes.heartbeat.promise;
  });

  it('does not answer a commit made while a sync ran with that sync, but with the next', async () => {
    const first = watch(store.plants.create([plant(20n)]));
    await turns();
    assert.equal(held.started, 1);
    const second = watch(store.plants.create([plant(21n)]));
    await turns();
    held.release();
    await turns();
    assert.equal(first.settled(), true, 'the first commit is covered by the first sync');
    assert.equal(second.settled(), false, 'the second was committed after the first sync began');
    assert.equal(held.started, 2, 'the next sync starts as soon as the first returns');
    held.release();
    assert.deepEqual(await second.promise, [{ kind: 'created' }]);
  });

  it('shows nothing whose sync has not returned: get and list, here and through a worker thread\'s store', async () => {
    const worker = DelegatingSqliteStore.open(
      file,
      {
        plants: { create: () => Promise.reject(new Error('unused')), delete: () => Promise.reject(new Error('unused')) },
        tokens: { recordUse: async () => undefined },
        checkWritable: async () => undefined,
      },
      store.durableMark,
    );
    try {
      const created = watch(store.plants.create([plant(30n)]));
      await turns();
      const reads = {
        get: watch(store.plants.get(30n)),
        list: watch(store.plants.list({ limit: 10 })),
        workerGet: watch(worker.plants.get(30n)),
        workerList: watch(worker.plants.list({ limit: 10 })),
      };
      await turns();
      assert.equal(created.settled(), false);
      for (const [name, read] of Object.entries(reads)) assert.equal(read.settled(), false, `${name} waits for the sync`);
      held.release();
      await created.promise;
      assert.deepEqual(await reads.get.promise, plant(30n));
      assert.deepEqual(await reads.workerGet.promise, plant(30n));
      assert.deepEqual((await reads.list.promise).map((row) => row.id), [30n]);
      assert.deepEqual((await reads.workerList.promise).map((row) => row.id), [30n]);
      // A quiet store: nothing begun since the last sync, so a read waits for none.
      const syncs = held.started;
      assert.deepEqual(await worker.plants.get(30n), plant(30n));
      assert.deepEqual(await store.plants.get(30n), plant(30n));
      assert.equal(held.started, syncs);
    } finally {
      await worker.close();
    }
  });

  it('write queue: holds the next batch while a sync runs, commits it whole when the sync returns, and wakes the dispatcher after the sync', async () => {
    let woken = 0;
    const queue = new WriteQueue(store.plants, {
      queueLimit: 100,
      batchLimit: 100,
      concurrency: store.writeConcurrency,
      pacing: store.commitPacing,
      onCreated: () => {
        woken += 1;
      },
    });
    const first = watch(queue.create(plant(40n)));
    await turns();
    assert.equal(store.durability.begun, 1, 'an idle store commits at once');
    const later = [41n, 42n, 43n].map((id) => watch(queue.create(plant(id))));
    await turns();
    assert.equal(store.durability.begun, 1, 'held in the queue while the sync runs');
    assert.equal(woken, 0, 'the dispatcher is not woken before the sync');
    held.release();
    assert.equal((await first.promise).kind, 'created');
    // Read in the turn the sync returned in, after it (as a request later in the same poll phase): it joins that commit.
    later.push(watch(queue.create(plant(44n))));
    await turns(1);
    assert.equal(store.durability.begun, 2, 'the three held creates and the one of the same turn committed in one transaction');
    assert.equal(woken, 1);
    await turns();
    assert.ok(later.every((create) => !create.settled()), 'answered only after their own sync');
    held.release();
    for (const create of later.slice(0, 3)) assert.equal((await create.promise).kind, 'created');
    await turns();
    assert.ok(later[3]?.settled(), 'the one of the same turn is answered after the same sync');
    assert.equal((await later[3]?.promise)?.kind, 'created');
    assert.equal(store.durability.begun, 2, 'no transaction of its own for the one of the same turn');
    assert.equal(woken, 2);
    await queue.drain();
  });

  it('write queue: past the batch limit, commits several transactions when the sync returns, all covered by the next sync', async () => {
    const queue = new WriteQueue(store.plants, { queueLimit: 100, batchLimit: 2, concurrency: store.writeConcurrency, pacing: store.commitPacing });
    const first = watch(queue.create(plant(80n)));
    await turns();
    const later = [81n, 82n, 83n, 84n, 85n].map((id) => watch(queue.create(plant(id))));
    await turns();
    assert.equal(store.durability.begun, 1);
    held.release();
    await first.promise;
    await turns(1);
    assert.equal(store.durability.begun, 4, 'three transactions of at most 2 rows committed in the turn the sync returned in');
    assert.equal(held.started, 2, 'and one sync covers them');
    held.release();
    for (const create of later) assert.equal((await create.promise).kind, 'created');
    await queue.drain();
  });

  it('write queue: after a sync, waits for the clients just answered to send again (WRITE_SYNC_HOLD_MS), or the hold\'s end', async (t) => {
    // Only setTimeout is mocked: the hold's end comes when the test says, never by the machine's pace.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const queue = new WriteQueue(store.plants, { queueLimit: 100, batchLimit: 100, concurrency: store.writeConcurrency, pacing: store.commitPacing, postSyncHoldMs: 1 });
    const first = watch(queue.create(plant(90n)));
    await turns();
    const waiting = [91n, 92n, 93n].map((id) => watch(queue.create(plant(id))));
    await turns();
    held.release();
    await first.promise;
    await turns();
    assert.equal(store.durability.begun, 1, 'held: 3 rows wait, and the client of the one answered has not sent again');
    const returned = watch(queue.create(plant(94n)));
    await turns();
    assert.equal(store.durability.begun, 2, 'once it has, the four commit in one transaction');
    held.release();
    for (const create of [...waiting, returned]) assert.equal((await create.promise).kind, 'created');
    await turns();
    const straggler = watch(queue.create(plant(95n)));
    await turns();
    assert.equal(store.durability.begun, 2, 'one of the four answered has sent again: held for the others');
    t.mock.timers.tick(1);
    await turns();
    assert.equal(store.durability.begun, 2, 'one came within the hold\'s time: held on for the others');
    t.mock.timers.tick(1);
    await turns();
    assert.equal(store.durability.begun, 3, 'committed once the hold\'s time passed with none arriving');
    // The others never came back (not a closed loop): the next syncs commit what waits at once, without a hold.
    const late = [96n, 97n].map((id) => watch(queue.create(plant(id))));
    await turns();
    held.release();
    assert.equal((await straggler.promise).kind, 'created');
    await turns();
    assert.equal(store.durability.begun, 4, 'after a hold that ran out, what waits commits as the sync returns');
    held.release();
    for (const create of late) assert.equal((await create.promise).kind, 'created');
    await queue.drain();
  });

  it('refuses every answer a failed sync was to cover, and everything after, until restarted', async () => {
    const created = watch(store.plants.create([plant(50n)]));
    await turns();
    const read = watch(store.plants.get(50n));
    await turns();
    held.fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    await assert.rejects(created.promise, StorageUnavailableError);
    await assert.rejects(read.promise, StorageUnavailableError);
    await assert.rejects(store.plants.create([plant(51n)]), StorageUnavailableError);
    await assert.rejects(store.plants.get(50n), StorageUnavailableError);
    await assert.rejects(store.checkWritable(), StorageUnavailableError);
    assert.equal(held.started, 1, 'no commit, so no sync, after the failure');
    assert.equal(incidents.filter((incident) => incident.level === 'error').length, 1);
    assert.match(incidents[0]?.message ?? '', /restarted/);
  });

  it('goes on when a failed sync covered only commits that failed themselves (a full disk, a read-only file system)', async () => {
    held.holding = false;
    await store.plants.create([plant(70n)]);
    held.holding = true;
    // A write that fails by itself after its number was taken: a token of a name already stored.
    const token: NewToken = { name: 'twice', hash: Buffer.alloc(32, 1), scopes: [], createdAt: new Date(), expiresAt: null };
    held.holding = false;
    await store.tokens.add(token);
    held.holding = true;
    const clash = watch(store.tokens.add({ ...token, hash: Buffer.alloc(32, 2) }));
    await turns();
    held.fail(Object.assign(new Error('EROFS: read-only file system, fdatasync'), { code: 'EROFS' }));
    await assert.rejects(clash.promise, (error: Error) => !(error instanceof StorageUnavailableError), 'refused for its own reason');
    held.holding = false;
    assert.deepEqual(await store.plants.get(70n), plant(70n), 'reads go on');
    assert.deepEqual(await store.plants.create([plant(71n)]), [{ kind: 'created' }], 'and writes');
    assert.equal(incidents.filter((incident) => incident.level === 'error').length, 0);
  });

  it('refuses what it cannot make durable once the WAL is removed under it', async () => {
    held.holding = false;
    await store.plants.create([plant(60n)]);
    fs.rmSync(`${file}-wal`);
    await assert.rejects(store.plants.create([plant(61n)]), StorageUnavailableError);
    await assert.rejects(store.checkWritable(), StorageUnavailableError);
    // The checkpointer thread may report its own failures on the removed WAL as well.
    assert.ok(
      incidents.some((incident) => incident.level === 'error' && /WAL .* was removed while open/.test(String(incident.error?.message))),
      JSON.stringify(incidents.map((incident) => incident.error?.message ?? incident.message)),
    );
  });
});

describe('SQLite syncs on the event loop', () => {
  it('once syncs are quick and the loop idle, syncs on the loop, and answers each create only after its sync', async (t) => {
    const database = await sqliteDatabase();
    // An idle loop (its clock moves, its busy time never does), and every sync counted quick whatever the disk's speed.
    let now = 0;
    const idle = new LoopLoad({ now: () => (now += 1000), loopActive: () => 0 });
    const store = SqliteStore.open(sqliteFile(database.url), { placement: new SyncPlacement(idle, Number.POSITIVE_INFINITY) });
    const onLoop: Array<{ durable: number; begun: number }> = [];
    const fdatasyncSync = fs.fdatasyncSync;
    t.mock.method(fs, 'fdatasyncSync', (fd: number) => {
      onLoop.push({ durable: store.durability.durableSeq, begun: store.durability.begun });
      fdatasyncSync(fd);
    });
    try {
      for (let id = 1n; id <= BigInt(QUICK_SYNCS_BEFORE_LOOP * 2); id += 1n) {
        assert.equal((await store.plants.create([plant(id)]))[0]?.kind, 'created');
        assert.equal(store.durability.durableSeq, store.durability.begun, `create ${id} answered after a sync covering it`);
      }
      assert.ok(onLoop.length >= QUICK_SYNCS_BEFORE_LOOP / 2, `${onLoop.length} syncs on the loop of ${QUICK_SYNCS_BEFORE_LOOP * 2}`);
      assert.ok(onLoop.every((sync) => sync.durable !== sync.begun), 'each sync on the loop covered a commit not yet durable');
      assert.equal((await store.plants.get(BigInt(QUICK_SYNCS_BEFORE_LOOP * 2)))?.name, 'fern');
    } finally {
      await store.close();
      await database.cleanup();
    }
  });
});
