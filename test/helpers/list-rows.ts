/**
 * The rows the list-query tests fill a database with, behind the store's back (twenty thousand creates through HTTP
 * would only slow the tests down), and the list queries the stores prepare, the very texts. Used by
 * test/storage/query-plans.test.ts (their plans) and test/http/list-queries.test.ts (GET /plants runs them).
 */
import { DatabaseSync } from 'node:sqlite';
import type pg from 'pg';
import { POSTGRES_LIST_QUERIES } from '../../src/storage/postgres/plants.js';
import { SQLITE_LIST_QUERIES } from '../../src/storage/sqlite/plants.js';
import { prepareWrite, transaction } from '../../src/storage/sqlite/connection.js';

/** The list queries the stores prepare, the very texts. */
export const LIST_SQL = { sqlite: SQLITE_LIST_QUERIES, postgres: POSTGRES_LIST_QUERIES } as const;

export const ROWS = 20_000;
/**
 * Rows with id % TAGS === 3 carry TAG: one in a hundred. With a tag on a tenth of the rows, stored in id order, the
 * planner rightly finds a deep page cheaper by walking the primary key and skipping other tags (measured: "Limit >
 * Index Scan on plants_pkey"), and that would pass even with plants_by_tag dropped; a selective tag needs the index.
 */
export const TAGS = 100;
export const LIMIT = 20;
export const TAG = 'tag-3';

/** ROWS plants with ids 1 to ROWS into a migrated SQLite file, every seventh without a tag. */
export function fillSqlite(file: string): void {
  const filler = new DatabaseSync(file);
  try {
    const insert = prepareWrite<[number, string, string | null]>(filler, 'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)');
    transaction(filler, () => {
      for (let id = 1; id <= ROWS; id += 1) insert.run(id, `plant ${id}`, id % 7 === 0 ? null : `tag-${id % TAGS}`);
    });
  } finally {
    filler.close();
  }
}

/**
 * The same rows into a migrated PostgreSQL database, with statistics: enough that the planner weighs a sequential scan
 * against the index honestly (on a near-empty table it rightly prefers to scan and sort, and that would prove nothing
 * either way). Stored in random order, as random ids are, so the heap's order does not favour the primary key.
 */
export async function fillPostgres(client: pg.Client): Promise<void> {
  await client.query(
    `INSERT INTO plants (id, name, tag)
     SELECT g, 'plant ' || g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'tag-' || (g % ${TAGS}) END
     FROM generate_series(1, ${ROWS}) AS g ORDER BY random()`,
  );
  await client.query('ANALYZE plants');
}
