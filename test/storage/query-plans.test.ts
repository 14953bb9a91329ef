/**
 * Listing walks an index in id order on both stores: the keyset queries of GET /plants use the primary key, and
 * with a tag the (tag, id) index plants_by_tag, with no sort and no full scan. That is what makes a deep page cost
 * what the first does (docs/api.md, "Read and delete"); a dropped or unusable index would still answer correctly, only
 * slowly, so no behavioural test would notice. Each check is also run against a database whose index was dropped,
 * to show it fails then. That GET /plants runs these very queries is checked in test/http/list-queries.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.js';
import { INT64_MIN } from '../../src/json/int64.js';
import { openStore } from '../../src/storage/open.js';
import type { Store } from '../../src/storage/store.js';
import { postgresDatabase, sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { fillPostgres, fillSqlite, LIMIT, LIST_SQL as SQL, ROWS, TAG } from '../helpers/list-rows.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

/** The plan's lines (EXPLAIN QUERY PLAN's `detail` column). */
function sqlitePlan(db: DatabaseSync, sql: string, params: SQLInputValue[]): string[] {
  return db
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...params)
    .map((row) => (row as { detail: string }).detail);
}

/**
 * What is wrong with SQLite's plans for the list queries, or undefined. A single SEARCH line on the right key is a
 * range walk in id order; a SCAN, another index, or "USE TEMP B-TREE FOR ORDER BY" (a sort) would be a second line
 * or another text.
 */
function sqlitePlanProblem(db: DatabaseSync): string | undefined {
  const listAll = sqlitePlan(db, SQL.sqlite.listAll, [INT64_MIN, LIMIT]);
  if (JSON.stringify(listAll) !== JSON.stringify(['SEARCH plants USING INTEGER PRIMARY KEY (rowid>?)'])) {
    return `list all: ${JSON.stringify(listAll)}`;
  }
  const listByTag = sqlitePlan(db, SQL.sqlite.listByTag, [TAG, INT64_MIN, LIMIT]);
  // In the index, the integer primary key is the column `id`, and is named so.
  if (JSON.stringify(listByTag) !== JSON.stringify(['SEARCH plants USING INDEX plants_by_tag (tag=? AND rowid>?)'])) {
    return `list by tag: ${JSON.stringify(listByTag)}`;
  }
  return undefined;
}

describe('index use on SQLite', () => {
  let db: TestDatabase;
  let store: Store | undefined;
  let file: string;
  const closeStore = async () => {
    const open = store;
    store = undefined;
    await open?.close();
  };

  before(async () => {
    db = await sqliteDatabase();
    file = db.url.slice('sqlite:'.length);
    // The schema is the product's own: the store migrates the database it opens.
    store = await openStore(loadConfig({ DATABASE_URL: db.url }).database);
    fillSqlite(file);
  });
  after(async () => {
    await closeStore();
    await db?.cleanup();
  });

  it('lists through the integer primary key (rowid>?) and, by tag, through plants_by_tag (tag=? AND rowid>?), with no sort', (context) => {
    const reader = new DatabaseSync(file, { readOnly: true });
    try {
      assert.equal(sqlitePlanProblem(reader), undefined);
      context.diagnostic(
        `sqlite plans: list all ${JSON.stringify(sqlitePlan(reader, SQL.sqlite.listAll, [INT64_MIN, LIMIT]))}, ` +
          `by tag ${JSON.stringify(sqlitePlan(reader, SQL.sqlite.listByTag, [TAG, INT64_MIN, LIMIT]))}`,
      );
    } finally {
      reader.close();
    }
  });

  it('the check fails once plants_by_tag is dropped', async (context) => {
    // The store goes first: it must not see its schema change under it.
    await closeStore();
    const writer = new DatabaseSync(file);
    try {
      writer.exec('DROP INDEX plants_by_tag');
      const problem = sqlitePlanProblem(writer);
      assert.match(String(problem), /^list by tag: /);
      context.diagnostic(`sqlite without plants_by_tag: ${problem}`);
    } finally {
      writer.close();
    }
  });
});

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodesOf(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodesOf)];
}

function describePlan(plan: PlanNode): string {
  return nodesOf(plan)
    .map((node) => node['Node Type'] + (node['Index Name'] ? ` on ${node['Index Name']}` : ''))
    .join(' > ');
}

/** EXPLAIN of one query with these parameter values: the custom plan pg's unnamed statements get, as the store's. */
async function postgresPlan(client: pg.Client, sql: string, params: unknown[]): Promise<PlanNode> {
  const result = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  const plan = result.rows[0]?.['QUERY PLAN'][0]?.Plan;
  assert.ok(plan, 'EXPLAIN answered a plan');
  return plan;
}

/**
 * What is wrong with one PostgreSQL plan, or undefined: it must read `index` by an index scan, and neither scan the
 * whole table nor sort. A bitmap scan on the index would use it but lose id order and so need a Sort: refused too,
 * because then a page costs every row of the tag rather than the page's own.
 */
function postgresPlanProblem(plan: PlanNode, index: string): string | undefined {
  const nodes = nodesOf(plan);
  const walks = nodes.some((node) => (node['Node Type'] === 'Index Scan' || node['Node Type'] === 'Index Only Scan') && node['Index Name'] === index);
  const bad = nodes.filter((node) => node['Node Type'] === 'Seq Scan' || node['Node Type'] === 'Sort');
  if (!walks || bad.length > 0) return `expected an index scan on ${index} with no Seq Scan or Sort: ${describePlan(plan)}`;
  return undefined;
}

/** Parameter sets for the list queries: the first page, a deep page, and (by tag) a tag no plant has. */
const PAGES = [
  { from: INT64_MIN, tag: TAG },
  { from: 15_000n, tag: TAG },
  { from: INT64_MIN, tag: 'no-such-tag' },
] as const;

async function postgresPlanProblems(client: pg.Client): Promise<string[]> {
  const problems: string[] = [];
  for (const { from, tag } of PAGES) {
    const all = postgresPlanProblem(await postgresPlan(client, SQL.postgres.listAll, [String(from), LIMIT]), 'plants_pkey');
    if (all) problems.push(`list all after ${from}: ${all}`);
    const byTag = postgresPlanProblem(await postgresPlan(client, SQL.postgres.listByTag, [String(from), LIMIT, tag]), 'plants_by_tag');
    if (byTag) problems.push(`list ${tag} after ${from}: ${byTag}`);
  }
  return problems;
}

describe('index use on PostgreSQL', () => {
  let db: TestDatabase;
  let store: Store | undefined;
  let client: pg.Client;
  const closeStore = async () => {
    const open = store;
    store = undefined;
    await open?.close();
  };

  before(async () => {
    // A PostgreSQL that cannot start fails the suite: nothing is skipped.
    db = await postgresDatabase();
    store = await openStore(loadConfig({ DATABASE_URL: db.url }).database);
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    await fillPostgres(client);
  });
  after(async () => {
    await client?.end();
    await closeStore();
    await db?.cleanup();
  });

  it(`lists through plants_pkey and, by tag, through plants_by_tag, with no Seq Scan or Sort, on ${ROWS} analysed rows`, async (context) => {
    assert.deepEqual(await postgresPlanProblems(client), []);
    context.diagnostic(
      `postgres plans: list all ${describePlan(await postgresPlan(client, SQL.postgres.listAll, [String(INT64_MIN), LIMIT]))}; ` +
        `by tag ${describePlan(await postgresPlan(client, SQL.postgres.listByTag, [String(INT64_MIN), LIMIT, TAG]))}`,
    );
  });

  it('the check fails once plants_by_tag, then the primary key, is dropped', async (context) => {
    // The store goes first: it must not see its schema change under it.
    await closeStore();
    await client.query('DROP INDEX plants_by_tag');
    const withoutTagIndex = await postgresPlanProblems(client);
    assert.ok(withoutTagIndex.length > 0, 'dropping plants_by_tag is noticed');
    assert.ok(withoutTagIndex.every((problem) => problem.startsWith('list tag-') || problem.startsWith('list no-such-tag')), withoutTagIndex.join('\n'));
    await client.query('ALTER TABLE plants DROP CONSTRAINT plants_pkey');
    const withoutPrimaryKey = await postgresPlanProblems(client);
    assert.ok(withoutPrimaryKey.some((problem) => problem.startsWith('list all')), withoutPrimaryKey.join('\n'));
    context.diagnostic(`postgres without the indexes: ${withoutTagIndex[0]}; ${withoutPrimaryKey[0]}`);
  });
});
