/**
 * Listing walks an index in id order on both stores: the keyset queries of GET /plants use the primary key, and
 * with a tag the (tag, id) index plants_by_tag, with no sort and no full scan. That is what makes a deep page cost
 * what the first does (docs/api.md, "Read and delete"); a dropped or unusable index would still answer correctly, only
 * slowly, so no behavioural test would notice. Each check is also run against a database whose index was dropped,
 * to show it fails then.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import pg from 'pg';
import { INT64_MIN } from '../../src/int64.js';
import { POSTGRES_LIST_QUERIES } from '../../src/storage/postgres/plants.js';
import { SQLITE_LIST_QUERIES } from '../../src/storage/sqlite/plants.js';
import { prepare, prepareWrite, transaction } from '../../src/storage/sqlite/connection.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { idsOf } from '../helpers/assertions.js';
import { postgresDatabase, sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

/** The list queries the stores prepare, the very texts. */
const SQL = { sqlite: SQLITE_LIST_QUERIES, postgres: POSTGRES_LIST_QUERIES } as const;

const ROWS = 20_000;
/**
 * Rows with id % TAGS === 3 carry TAG: one in a hundred. With a tag on a tenth of the rows, stored in id order, the
 * planner rightly finds a deep page cheaper by walking the primary key and skipping other tags (measured: "Limit >
 * Index Scan on plants_pkey"), and that would pass even with plants_by_tag dropped; a selective tag needs the index.
 */
const TAGS = 100;
const LIMIT = 20;
const TAG = 'tag-3';

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
  if (JSON.stringify(listByTag) !== JSON.stringify(['SEARCH plants USING INDEX plants_by_tag (tag=? AND id>?)'])) {
    return `list by tag: ${JSON.stringify(listByTag)}`;
  }
  return undefined;
}

describe('index use on SQLite', () => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  let file: string;
  const closeApp = async () => {
    const app = t;
    t = undefined;
    await app?.close();
  };

  before(async () => {
    db = await sqliteDatabase();
    file = db.url.slice('sqlite:'.length);
    // The schema is the product's own: the app migrates the database it opens.
    t = await startTestApp(db.url);
    // Rows go in behind the app's back: twenty thousand creates through HTTP would only slow the test down.
    const filler = new DatabaseSync(file);
    try {
      const insert = prepareWrite<[number, string, string | null]>(filler, 'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)');
      transaction(filler, () => {
        for (let id = 1; id <= ROWS; id += 1) insert.run(id, `plant ${id}`, id % 7 === 0 ? null : `tag-${id % TAGS}`);
      });
    } finally {
      filler.close();
    }
  });
  after(async () => {
    await closeApp();
    await db?.cleanup();
  });

  it('GET /plants answers what the list queries answer when run directly', async () => {
    const reader = new DatabaseSync(file, { readOnly: true });
    try {
      await assertQueryAnswersLikeTheApp(t as TestApp, async (tag, from) => {
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

  it('lists through the integer primary key (rowid>?) and, by tag, through plants_by_tag (tag=? AND id>?), with no sort', (context) => {
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
    // The app goes first: it must not see its schema change under it.
    await closeApp();
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
  let t: TestApp | undefined;
  let client: pg.Client;
  const closeApp = async () => {
    const app = t;
    t = undefined;
    await app?.close();
  };

  before(async () => {
    // A PostgreSQL that cannot start fails the suite: nothing is skipped.
    db = await postgresDatabase();
    t = await startTestApp(db.url);
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
    // Enough rows, with statistics, that the planner weighs a sequential scan against the index honestly: on a
    // near-empty table it rightly prefers to scan and sort, and that would prove nothing either way. Stored in random
    // order, as random ids are, so the heap's order does not favour the primary key.
    await client.query(
      `INSERT INTO plants (id, name, tag)
       SELECT g, 'plant ' || g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'tag-' || (g % ${TAGS}) END
       FROM generate_series(1, ${ROWS}) AS g ORDER BY random()`,
    );
    await client.query('ANALYZE plants');
  });
  after(async () => {
    await client?.end();
    await closeApp();
    await db?.cleanup();
  });

  it('GET /plants answers what the list queries answer when run directly', async () => {
    await assertQueryAnswersLikeTheApp(t as TestApp, async (tag, from) => {
      const result =
        tag === undefined
          ? await client.query<{ id: string }>(SQL.postgres.listAll, [String(from), LIMIT])
          : await client.query<{ id: string }>(SQL.postgres.listByTag, [String(from), LIMIT, tag]);
      return result.rows.map((row) => BigInt(row.id));
    });
  });

  it(`lists through plants_pkey and, by tag, through plants_by_tag, with no Seq Scan or Sort, on ${ROWS} analysed rows`, async (context) => {
    assert.deepEqual(await postgresPlanProblems(client), []);
    context.diagnostic(
      `postgres plans: list all ${describePlan(await postgresPlan(client, SQL.postgres.listAll, [String(INT64_MIN), LIMIT]))}; ` +
        `by tag ${describePlan(await postgresPlan(client, SQL.postgres.listByTag, [String(INT64_MIN), LIMIT, TAG]))}`,
    );
  });

  it('the check fails once plants_by_tag, then the primary key, is dropped', async (context) => {
    // The app goes first: it must not see its schema change under it.
    await closeApp();
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
