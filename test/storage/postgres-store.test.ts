import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.js';
import { StorageUnavailableError, type StorageErrorKind } from '../../src/storage/errors.js';
import { toErrorReply } from '../../src/http/error-reply.js';
import { pino } from 'pino';
import { openStore } from '../../src/storage/open.js';
import { MIGRATION_LOCK } from '../../src/storage/postgres/migrations.js';
import { translate, unavailableKind } from '../../src/storage/postgres/connection.js';
import { PostgresStore } from '../../src/storage/postgres/postgres-store.js';
import { postgresDatabase } from '../helpers/databases.js';
import { embeddedPostgresUrl, stopPostgresAfterAll } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

/** PostgreSQL-only behaviour of the store that the shared storage contract cannot express. */

stopPostgresAfterAll();

function failure(message: string, code?: string): Error {
  return code === undefined ? new Error(message) : Object.assign(new Error(message), { code });
}

describe('PostgreSQL errors', () => {
  // Each "not now" error with the kind plantstore_storage_errors_total counts it under; the rest are passed on as they are.
  const cases: Array<[string, Error, StorageErrorKind | 'as is']> = [
    ['53300 too many connections', failure('sorry, too many clients already', '53300'), 'resources'],
    ['53100 disk full', failure('could not extend file: No space left on device', '53100'), 'disk_full'],
    ['57P01 admin shutdown', failure('terminating connection due to administrator command', '57P01'), 'connection'],
    ['57014 statement timeout', failure('canceling statement due to statement timeout', '57014'), 'timeout'],
    ['08006 connection failure', failure('connection failure', '08006'), 'connection'],
    ['28P01 password rotated', failure('password authentication failed for user "app"', '28P01'), 'connection'],
    ['28000 refused by pg_hba', failure('no pg_hba.conf entry for host', '28000'), 'connection'],
    ['3D000 database gone', failure('database "plants" does not exist', '3D000'), 'connection'],
    ['40P01 deadlock', failure('deadlock detected', '40P01'), 'locked'],
    ['55P03 lock not available', failure('could not obtain lock on row', '55P03'), 'locked'],
    ['25006 read-only transaction', failure('cannot execute INSERT in a read-only transaction', '25006'), 'read_only'],
    ['58030 I/O error', failure('could not write to file', '58030'), 'io'],
    ['ECONNREFUSED', failure('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'), 'connection'],
    ['ETIMEDOUT', failure('connect ETIMEDOUT 10.0.0.1:5432', 'ETIMEDOUT'), 'timeout'],
    ['ENOENT on a Unix socket', failure('connect ENOENT /run/postgresql/.s.PGSQL.5432', 'ENOENT'), 'connection'],
    ['a lost connection', failure('Connection terminated unexpectedly'), 'connection'],
    ['a pool that cannot connect in time', failure('timeout exceeded when trying to connect'), 'timeout'],
    ['23505 unique violation', failure('duplicate key value violates unique constraint', '23505'), 'as is'],
    ['42P01 undefined table', failure('relation "plants" does not exist', '42P01'), 'as is'],
    ['3D0001, not 3D000', failure('made up', '3D0001'), 'as is'],
    ['an error with no code', failure('something else'), 'as is'],
  ];
  for (const [name, error, expected] of cases) {
    it(`answers ${name} ${expected === 'as is' ? 'as it is' : `as unavailable (503) of kind ${expected}, keeping the cause`}`, () => {
      const translated = translate(error);
      if (expected === 'as is') {
        assert.equal(translated, error);
        assert.equal(unavailableKind(error), undefined);
      } else {
        assert.ok(translated instanceof StorageUnavailableError, `${name} was not translated`);
        assert.equal(toErrorReply(translated, pino({ level: 'silent' }), 0).status, 503);
        assert.equal(translated.cause, error);
        assert.equal(unavailableKind(error), expected);
      }
    });
  }

  it('refuses with StorageUnavailableError a Unix socket with no server, a wrong password and a missing database', async () => {
    // The embedded server even when TEST_DATABASE_URL is set: its password authentication is known.
    const noServer = await fs.mkdtemp(path.join(os.tmpdir(), 'plantstore-no-socket-'));
    try {
      const attempts: Array<[string, string]> = [
        [`postgres://postgres:postgres@${encodeURIComponent(noServer)}/postgres`, 'ENOENT'],
        [(await embeddedPostgresUrl()).replace('postgres:postgres@', 'postgres:wrong@'), '28P01'],
        [await embeddedPostgresUrl('plantstore_no_such_database'), '3D000'],
      ];
      for (const [url, code] of attempts) {
        await assert.rejects(openStore(loadConfig({ DATABASE_URL: url }).database), (error: unknown) => {
          assert.ok(error instanceof StorageUnavailableError, `${code}: ${String(error)}`);
          assert.equal((error.cause as { code?: unknown }).code, code);
          return true;
        });
      }
    } finally {
      await fs.rm(noServer, { recursive: true, force: true });
    }
  });
});

describe('PostgreSQL creates racing other transactions', () => {
  it('answers ids committed by others while its statement ran: the stored row, or created if deleted meanwhile', async () => {
    const db = await postgresDatabase();
    const store = await openStore(loadConfig({ DATABASE_URL: db.url }).database);
    const [a, b, admin] = [new pg.Client(db.url), new pg.Client(db.url), new pg.Client(db.url)];
    try {
      for (const client of [a, b, admin]) await client.connect();
      const pidOf = async (client: pg.Client): Promise<number> => (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const blockedBy = (pid: number) => async () =>
        (await admin.query('SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])).rowCount === 1;
      // Two other transactions hold new, uncommitted rows; the store's insert (ascending ids) waits on b for 10,
      // then on a for 20. Both commit after the store's statement took its snapshot, so it cannot read them.
      await a.query('BEGIN');
      await a.query("INSERT INTO plants (id, name, tag) VALUES (20, 'by a', 'a')");
      await b.query('BEGIN');
      await b.query("INSERT INTO plants (id, name, tag) VALUES (10, 'by b', NULL)");
      const outcomes = store.plants.create([
        { id: 20n, name: 'ours', tag: null },
        { id: 10n, name: 'ours', tag: null },
      ]);
      await waitFor('the store to wait for b', blockedBy(await pidOf(b)));
      await b.query('COMMIT');
      await waitFor('the store to wait for a', blockedBy(await pidOf(a)));
      // 10 was committed by b after the store's snapshot and is gone again before the store looks a second time.
      await admin.query('DELETE FROM plants WHERE id = 10');
      await a.query('COMMIT');
      assert.deepEqual(await outcomes, [{ kind: 'existing', stored: { id: 20n, name: 'by a', tag: 'a' } }, { kind: 'created' }]);
      assert.deepEqual(await store.plants.get(10n), { id: 10n, name: 'ours', tag: null });
    } finally {
      for (const client of [a, b, admin]) await client.end().catch(() => undefined);
      await store.close();
      await db.cleanup();
    }
  });
});

describe('PostgreSQL creates cut short', () => {
  it('keeps the answers of rows already committed when a later statement of the call fails', async () => {
    const db = await postgresDatabase();
    const store = await openStore(loadConfig({ DATABASE_URL: db.url }).database);
    const query = pg.Pool.prototype.query;
    try {
      assert.deepEqual(await store.plants.create([{ id: 1n, name: 'stored before', tag: null }]), [{ kind: 'created' }]);
      // The insert commits the new row; the read of the row that was already there then loses its connection.
      pg.Pool.prototype.query = function (this: pg.Pool, ...args: unknown[]) {
        const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text;
        if (text?.includes('= ANY(')) return Promise.reject(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }));
        return (query as (...values: unknown[]) => unknown).apply(this, args);
      } as typeof query;
      const outcomes = await store.plants.create([
        { id: 1n, name: 'stored before', tag: null },
        { id: 2n, name: 'new', tag: null },
      ]);
      pg.Pool.prototype.query = query;
      assert.equal(outcomes[0]?.kind, 'failed');
      assert.ok(outcomes[0]?.kind === 'failed' && outcomes[0].error instanceof StorageUnavailableError);
      assert.deepEqual(outcomes[1], { kind: 'created' });
      assert.deepEqual(await store.plants.get(2n), { id: 2n, name: 'new', tag: null });
    } finally {
      pg.Pool.prototype.query = query;
      await store.close();
      await db.cleanup();
    }
  });
});

describe('PostgreSQL migrations', () => {
  it('wait for another instance\'s migration lock beyond the query timeout, which still bounds every request', async () => {
    const db = await postgresDatabase();
    const config = loadConfig({ DATABASE_URL: db.url }).database;
    assert.equal(config.kind, 'postgres');
    const timeouts = { connectMs: 2000, queryMs: 200 };
    const holder = new pg.Client(db.url);
    let store: PostgresStore | undefined;
    try {
      await holder.connect();
      // Another instance migrating, for three times the query timeout.
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      const opening = PostgresStore.open(config, timeouts);
      opening.catch(() => undefined);
      await waitFor('open to wait for the migration lock', async () =>
        (await holder.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rowCount === 1,
      );
      await new Promise((resolve) => setTimeout(resolve, 3 * timeouts.queryMs));
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      store = await opening;
      assert.deepEqual(await store.plants.create([{ id: 1n, name: 'one', tag: null }]), [{ kind: 'created' }]);
      // A request's statement stuck behind a row lock is cut off at the query timeout, as before.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM plants WHERE id = 1 FOR UPDATE');
      const started = performance.now();
      await assert.rejects(store.plants.delete(1n), StorageUnavailableError);
      assert.ok(performance.now() - started < 10 * timeouts.queryMs, `took ${Math.round(performance.now() - started)} ms`);
      await holder.query('ROLLBACK');
    } finally {
      await holder.end().catch(() => undefined);
      await store?.close();
      await db.cleanup();
    }
  });
});
