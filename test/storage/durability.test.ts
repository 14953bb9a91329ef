import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.js';
import { openConnection, pragmaValue } from '../../src/storage/sqlite/connection.js';
import { poolConfig } from '../../src/storage/postgres/connection.js';
import { postgresDatabase, sqliteDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

/**
 * "200 means durable" rests on settings that no crash test can see (a SIGKILL leaves the OS page cache, and so
 * unsynced writes, intact): SQLite's WAL with synchronous=FULL on every connection but the store's writer (whose
 * commits are synced apart, off the event loop: test/storage/sqlite-wal-sync.test.ts), so that checkpoints sync the WAL
 * and the database; and PostgreSQL's synchronous_commit=on.
 */
describe('durability settings', () => {
  it('SQLite connections (every one the store opens comes from openConnection) use WAL with synchronous=FULL', async () => {
    const db = await sqliteDatabase();
    try {
      const connection = openConnection(db.url.slice('sqlite:'.length), 1);
      try {
        assert.equal(pragmaValue(connection, 'journal_mode'), 'wal');
        assert.equal(pragmaValue(connection, 'synchronous'), 2, 'synchronous=FULL is 2');
      } finally {
        connection.close();
      }
    } finally {
      await db.cleanup();
    }
  });

  it('PostgreSQL connections commit with synchronous_commit=on even where the database default is off', async () => {
    const db = await postgresDatabase();
    try {
      const name = new URL(db.url).pathname.slice(1);
      const admin = new pg.Client({ connectionString: db.url });
      await admin.connect();
      try {
        await admin.query(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
      } finally {
        await admin.end();
      }
      // A connection without the service's settings sees the weakened default, so this test can fail.
      const plain = new pg.Client({ connectionString: db.url });
      await plain.connect();
      try {
        assert.equal((await plain.query('SHOW synchronous_commit')).rows[0].synchronous_commit, 'off');
      } finally {
        await plain.end();
      }
      // An `options` parameter in the URL is kept (its search_path applies) and cannot turn synchronous_commit off,
      // whether it sets something else (pg used to let it replace the pool's options) or sets it off outright.
      const variants: Array<[string, string]> = [
        ['', '"$user", public'],
        ['?options=-c%20search_path%3Dpublic', 'public'],
        ['?options=-c%20synchronous_commit%3Doff%20-c%20search_path%3Dpg_catalog', 'pg_catalog'],
        ['?options=--synchronous_commit%3Doff&sslmode=disable', '"$user", public'],
      ];
      for (const [query, searchPath] of variants) {
        const config = loadConfig({ DATABASE_URL: `${db.url}${query}` }).database;
        assert.equal(config.kind, 'postgres');
        const pool = new pg.Pool(poolConfig(config as Extract<typeof config, { kind: 'postgres' }>));
        try {
          const { rows } = await pool.query("SELECT current_setting('synchronous_commit') AS sync, current_setting('search_path') AS path");
          assert.deepEqual(rows[0], { sync: 'on', path: searchPath }, `DATABASE_URL ending ${JSON.stringify(query)}`);
        } finally {
          await pool.end();
        }
      }
    } finally {
      await db.cleanup();
    }
  });
});
