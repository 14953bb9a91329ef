import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { generateToken, hashToken } from '../src/auth/tokens.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startServices, type Services } from '../src/services.js';
import { StorageUnavailableError } from '../src/storage/errors.js';
import { SqliteStore } from '../src/storage/sqlite/sqlite-store.js';
import { WalSync } from '../src/storage/sqlite/wal-sync.js';
import { sqliteDatabase, type TestDatabase } from './helpers/databases.js';

/** A sync the test releases by hand: every call waits until `release()`, and records which file it was asked to sync. */
function heldSync() {
  const files: string[] = [];
  const pending: Array<() => void> = [];
  let holding = true;
  return {
    files,
    get waiting() {
      return pending.length;
    },
    sync: (fd: number) => {
      files.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
      if (!holding) return Promise.resolve();
      return new Promise<void>((resolve) => pending.push(resolve));
    },
    /** Lets every sync waiting now (not later ones) return. */
    release() {
      for (const resolve of pending.splice(0)) resolve();
    },
    /** Stops holding: waiting and later syncs return at once. */
    stop() {
      holding = false;
      this.release();
    },
  };
}

/** Settles `promise` into a flag the test can look at without awaiting it. */
function track<T>(promise: Promise<T>) {
  const state = { settled: false, value: undefined as T | undefined };
  void promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    () => Object.assign(state, { settled: true }),
  );
  return state;
}

/** A few turns of the event loop, long enough for anything not waiting on a sync to settle. */
const turns = () => new Promise((resolve) => setTimeout(resolve, 20));

/** Waits until `condition` holds, or fails naming what it waited for. */
async function until(condition: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('WalSync: a commit is durable only after a sync that began after it', () => {
  it('covers every commit made before a sync began, and none made while it ran', async () => {
    const held = heldSync();
    const fd = fs.openSync('/dev/null', 'r');
    after(() => fs.closeSync(fd));
    const wal = new WalSync(fd, held.sync);
    assert.equal(wal.durable(), undefined, 'nothing committed: nothing to wait for');
    // Two commits, then their waits: the first wait starts a sync, which covers both.
    const [one, two] = [wal.committed(), wal.committed()];
    const first = track(wal.durable(one) as Promise<void>);
    const second = track(wal.durable(two) as Promise<void>);
    await turns();
    assert.equal(held.waiting, 1, 'one sync covers both commits made before it began');
    // A commit made while that sync runs needs the next one.
    const third = track(wal.durable(wal.committed()) as Promise<void>);
    held.release();
    await turns();
    assert.deepEqual([first.settled, second.settled, third.settled], [true, true, false]);
    assert.equal(held.waiting, 1, 'the next sync started by itself for the later commit');
    held.release();
    await turns();
    assert.equal(third.settled, true);
    assert.equal(wal.durable(), undefined, 'everything durable: a read waits for nothing');
  });

  it('after a failed sync refuses every waiter and every later wait, and never retries', async () => {
    let calls = 0;
    const fd = fs.openSync('/dev/null', 'r');
    after(() => fs.closeSync(fd));
    const failures: unknown[] = [];
    const wal = new WalSync(
      fd,
      async () => {
        calls += 1;
        throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
      },
      (error) => failures.push(error),
    );
    await assert.rejects(wal.durable(wal.committed()) as Promise<void>, StorageUnavailableError);
    await assert.rejects(wal.durable(wal.committed()) as Promise<void>, StorageUnavailableError);
    await assert.rejects(wal.durable(0) as Promise<void>, StorageUnavailableError, 'even a read of what was durable before');
    assert.equal(calls, 1, 'a sync that failed is not retried: Linux may have dropped the pages and reports it once');
    assert.equal(failures.length, 1);
    assert.ok(wal.failure instanceof StorageUnavailableError);
  });
});

describe('SQLite: nothing is answered before the WAL sync that covers it', () => {
  let db: TestDatabase;
  let held: ReturnType<typeof heldSync>;
  let store: SqliteStore;
  let services: Services;
  let app: FastifyInstance;
  let headers: Record<string, string>;
  let file: string;

  before(async () => {
    db = await sqliteDatabase();
    file = db.url.slice('sqlite:'.length);
    // The token is added before the sync is held, so that authentication has nothing to wait for.
    const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: db.url });
    store = SqliteStore.open(file);
    const token = generateToken();
    await store.addToken(`sync-${randomUUID()}`, hashToken(token), new Date());
    await store.close();
    held = heldSync();
    store = SqliteStore.open(file, { sync: held.sync });
    services = await startServices(config, store, createLogger(config));
    app = await buildApp(services);
    headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  });

  after(async () => {
    held.stop();
    await app.close();
    await services.close();
    await store.close();
    await db.cleanup();
  });

  const post = (id: string, name: string) => track(app.inject({ method: 'POST', url: '/plants', headers, payload: `{"id":${id},"name":"${name}"}` }));
  const get = (url: string) => track(app.inject({ method: 'GET', url, headers }));

  it('answers a create, a replay, a conflict, a read of it and its delete only once a sync covering them returns', async () => {
    const created = post('9007199254740993', 'Fern');
    await until(() => held.waiting > 0 || created.settled, 'the create to be committed');
    await turns();
    assert.equal(created.settled, false, 'the create is committed but not answered before its sync returns');
    // The plant is visible to the reader connection already; an answer from it must wait for the same sync.
    const read = get('/plants/9007199254740993');
    const listed = get('/plants');
    const replay = post('9007199254740993', 'Fern');
    const conflict = post('9007199254740993', 'Ivy');
    await turns();
    assert.deepEqual([read.settled, listed.settled, replay.settled, conflict.settled], [false, false, false, false]);
    // Releasing syncs until none waits answers all of them, exactly as without the hold.
    while (!(created.settled && read.settled && listed.settled && replay.settled && conflict.settled)) {
      held.release();
      await turns();
    }
    assert.equal(created.value?.statusCode, 200);
    assert.equal(read.value?.statusCode, 200);
    assert.equal(read.value?.body, '{"id":9007199254740993,"name":"Fern"}');
    assert.equal(replay.value?.statusCode, 200);
    assert.equal(conflict.value?.statusCode, 409);

    const deleted = track(app.inject({ method: 'DELETE', url: '/plants/9007199254740993', headers }));
    await until(() => held.waiting > 0 || deleted.settled, 'the delete to be committed');
    await turns();
    assert.equal(deleted.settled, false, 'a delete is answered only once it is durable');
    const readAfterDelete = get('/plants/9007199254740993');
    await turns();
    assert.equal(readAfterDelete.settled, false, 'a 404 decided by an unsynced delete waits too');
    while (!(deleted.settled && readAfterDelete.settled)) {
      held.release();
      await turns();
    }
    assert.equal(deleted.value?.statusCode, 204);
    assert.equal(readAfterDelete.value?.statusCode, 404);

    // What was synced is the database's own WAL, through which every commit of the write connection goes.
    assert.ok(held.files.length > 0);
    for (const synced of held.files) assert.equal(synced, fs.realpathSync(`${file}-wal`));
    assert.equal(path.basename(held.files[0] as string), `${path.basename(file)}-wal`);
  });

  it('answers reads at once when every commit is already durable', async () => {
    held.release();
    await turns();
    const read = get('/plants?limit=5');
    await turns();
    assert.equal(read.settled, true);
    assert.equal(held.waiting, 0);
  });
});
