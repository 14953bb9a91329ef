import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { pragmaValue } from '../../src/storage/sqlite/connection.js';
import { postgresDatabase, sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

/** What each store records as its schema version, read and written behind the store's back. */
const schemaVersion = {
  sqlite: {
    async read(url: string): Promise<number> {
      const db = new DatabaseSync(url.slice('sqlite:'.length));
      try {
        return pragmaValue(db, 'user_version') as number;
      } finally {
        db.close();
      }
    },
    async set(url: string, version: number): Promise<void> {
      const db = new DatabaseSync(url.slice('sqlite:'.length));
      try {
        db.exec(`PRAGMA user_version = ${version}`);
      } finally {
        db.close();
      }
    },
  },
  postgres: {
    async read(url: string): Promise<number> {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return (await client.query<{ version: number }>('SELECT max(version) AS version FROM plantstore_schema')).rows[0]?.version ?? 0;
      } finally {
        await client.end();
      }
    },
    async set(url: string, version: number): Promise<void> {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query('INSERT INTO plantstore_schema (version) VALUES ($1)', [version]);
      } finally {
        await client.end();
      }
    },
  },
};

/** Each store's current schema version. */
const CURRENT = { sqlite: 8, postgres: 7 } as const;

for (const [kind, create] of [
  ['sqlite', sqliteDatabase],
  ['postgres', postgresDatabase],
] as const) {
  describe(`schema versions on ${kind}`, () => {
    async function withDatabase(work: (db: TestDatabase) => Promise<void>): Promise<void> {
      const db = await create();
      try {
        await work(db);
      } finally {
        await db.cleanup();
      }
    }

    it('creates the schema at the current version, and opening again leaves it there', () =>
      withDatabase(async (db) => {
        const config = loadConfig({ DATABASE_URL: db.url }).database;
        await (await openStore(config)).close();
        const version = await schemaVersion[kind].read(db.url);
        assert.equal(
          version,
          CURRENT[kind],
          'plants and tokens (1), the readiness heartbeat (2), webhooks (3), token scopes and expiry (4), the trace context of webhook events (5), the change log (6), the tag index without untagged plants (7); SQLite: the change log rebuilt without AUTOINCREMENT or its time index (8)',
        );
        await (await openStore(config)).close();
        assert.equal(await schemaVersion[kind].read(db.url), version);
      }));

    it('refuses a database whose schema is newer than this plantstore, saying so', () =>
      withDatabase(async (db) => {
        const config = loadConfig({ DATABASE_URL: db.url }).database;
        await (await openStore(config)).close();
        await schemaVersion[kind].set(db.url, 99);
        await assert.rejects(openStore(config), new RegExp(`database schema version 99 is newer than this plantstore \\(${CURRENT[kind]}\\); upgrade plantstore`));
      }));
  });
}
