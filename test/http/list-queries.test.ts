/**
 * GET /plants runs the list queries whose plans test/storage/query-plans.test.ts checks: on both stores, listing
 * through HTTP answers what those very texts answer when run directly, with the parameters in the same order. Without
 * this, the plans checked could be of queries the app no longer runs.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { INT64_MIN } from '../../src/json/int64.js';
import { prepare } from '../../src/storage/sqlite/connection.js';
import { useTestApp, type TestApp } from '../helpers/app.js';
import { idsOf } from '../helpers/assertions.js';
import { postgresDatabase, sqliteDatabase } from '../helpers/databases.js';
import { fillPostgres, fillSqlite, LIMIT, LIST_SQL as SQL, TAG } from '../helpers/list-rows.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

/** Listing through HTTP answers what the query answers run directly, with the parameters in the same order. */
async function assertQueryAnswersLikeTheApp(t: TestApp, direct: (tag: string | undefined, from: bigint) => Promise<bigint[]>): Promise<void> {
  for (const [tag, after] of [
    [undefined, undefined],
    [TAG, undefined],
    [undefined, 10_000n],
    [TAG, 10_000n],
  ] as const) {
    const query = new URLSearchParams({ limit: String(LIMIT), ...(tag ? { tag } : {}), ...(after ? { after: String(after) } : {}) });
    const response = await t.app.inject({ method: 'GET', url: `/plants?${query}`, headers: { authorization: t.headers.authorization as string } });
    assert.equal(response.statusCode, 200, response.body);
    const expected = await direct(tag, after === undefined ? INT64_MIN : after + 1n);
    assert.equal(expected.length, LIMIT);
    assert.deepEqual(idsOf(response.body), expected, `GET /plants?${query}`);
  }
}

describe('the list queries on SQLite', () => {
  // The schema is the product's own: the app migrates the database it opens.
  const t = useTestApp(sqliteDatabase);
  let file: string;

  before(() => {
    file = t.databaseUrl.slice('sqlite:'.length);
    fillSqlite(file);
  });

  it('GET /plants answers what the list queries answer when run directly', async () => {
    const reader = new DatabaseSync(file, { readOnly: true });
    try {
      await assertQueryAnswersLikeTheApp(t, async (tag, from) => {
        const rows =
          tag === undefined
            ? prepare(reader, SQL.sqlite.listAll, { bigInts: true }).all(from, LIMIT)
            : prepare(reader, SQL.sqlite.listByTag, { bigInts: true }).all(tag, from, LIMIT);
        return rows.map((row) => (row as { id: bigint }).id);
      });
    } finally {
      reader.close();
    }
  });
});

describe('the list queries on PostgreSQL', () => {
  // A PostgreSQL that cannot start fails the suite: nothing is skipped.
  const t = useTestApp(postgresDatabase);
  /** A connection of the test's own, ended before the app's database is dropped. */
  async function connected<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end();
    }
  }

  before(() => connected(fillPostgres));

  it('GET /plants answers what the list queries answer when run directly', async () => {
    await connected((client) =>
      assertQueryAnswersLikeTheApp(t, async (tag, from) => {
        const result =
          tag === undefined
            ? await client.query<{ id: string }>(SQL.postgres.listAll, [String(from), LIMIT])
            : await client.query<{ id: string }>(SQL.postgres.listByTag, [String(from), LIMIT, tag]);
        return result.rows.map((row) => BigInt(row.id));
      }),
    );
  });
});
