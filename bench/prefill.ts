/**
 * Prefilled stores for the "millions of plants already stored" scenarios, on a schema created by the real CLI
 * (`plantstore migrate`).
 *
 * SQLite: built directly with node:sqlite (one transaction, no journal, no fsync, a page cache holding the whole
 * file) and cached in bench/.cache/ (git-ignored) by row count, id mode, how it is built (PREFILL_FORMAT) and a hash
 * of the compiled SQLite migrations. Each bench run works on a copy, so the cached file never changes. Random ids are
 * inserted in random order, as a store grows whose clients send them: its B-tree pages are as full as such a store's
 * (about nine tenths), not packed full as ids inserted in order leave them, where every later insert splits a page.
 * PostgreSQL: inserted into the bench's fresh embedded server on every run, in batches of ids sent as arrays.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { prepareValue, prepareWrite, transaction } from '../src/storage/sqlite/connection.js';
import { runCli, type EnvOverrides } from '../test/helpers/process.js';
import { prefillRandomId, RANDOM_HI_SPACE, type IdMode } from './ids.js';
import { cliOf, ROOT } from './layout.js';

const NAMES = ['Monstera deliciosa', 'Ficus lyrata', 'Pilea peperomioides', 'Calathea orbifolia'];
const TAGS = ['aroid', 'fig', 'pilea', null];

/** `count` distinct hi values out of RANDOM_HI_SPACE, ascending, uniformly chosen (Knuth's selection sampling). */
function* randomHis(count: number): Generator<number> {
  let needed = count;
  for (let hi = 0; hi < RANDOM_HI_SPACE && needed > 0; hi += 1) {
    if (Math.random() * (RANDOM_HI_SPACE - hi) < needed) {
      needed -= 1;
      yield hi;
    }
  }
}

/** `count` distinct random ids in random order (a Fisher-Yates shuffle of the ascending selection). */
function shuffledRandomIds(count: number): Float64Array {
  if (count > RANDOM_HI_SPACE) throw new RangeError(`--prefill with random ids is limited to ${RANDOM_HI_SPACE} rows`);
  const ids = new Float64Array(count);
  let at = 0;
  for (const hi of randomHis(count)) ids[at++] = prefillRandomId(hi);
  for (let index = count - 1; index > 0; index -= 1) {
    const other = Math.floor(Math.random() * (index + 1));
    const id = ids[index] as number;
    ids[index] = ids[other] as number;
    ids[other] = id;
  }
  return ids;
}

/** Changes the cached files' names whenever the way they are built changes. */
const PREFILL_FORMAT = 'grown1';

/** The prefill's page cache: enough for 10,000,000 plants, so that inserting in random order never waits for a read. */
const PREFILL_CACHE_KIB = 3 * 1024 * 1024;

function prefilledIds(mode: IdMode, count: number): Iterable<number> {
  if (mode === 'random') {
    if (count > RANDOM_HI_SPACE) throw new RangeError(`--prefill with random ids is limited to ${RANDOM_HI_SPACE} rows`);
    return (function* () {
      for (const hi of randomHis(count)) yield prefillRandomId(hi);
    })();
  }
  return (function* () {
    for (let id = 1; id <= count; id += 1) yield id;
  })();
}

export interface PrefillOptions {
  readonly count: number;
  readonly ids: IdMode;
  readonly log: (line: string) => void;
  /** The built checkout whose schema the SQLite file has (its CLI migrates it): this one unless --plantstore names another. */
  readonly root?: string;
}

/** The path of a cached SQLite file holding `count` plants (building it when missing). */
export function cachedSqlitePrefill(options: PrefillOptions): string {
  const { count, ids, log } = options;
  const root = options.root ?? ROOT;
  const migrations = fs.readFileSync(path.join(root, 'dist/src/storage/sqlite/migrations.js'));
  const schema = createHash('sha256').update(migrations).update(PREFILL_FORMAT).digest('hex').slice(0, 12);
  const dir = path.join(ROOT, 'bench/.cache');
  const file = path.join(dir, `sqlite-${count}-${ids}-${schema}.db`);
  if (fs.existsSync(file)) {
    log(`prefill: using cached ${path.relative(ROOT, file)}`);
    return file;
  }
  fs.mkdirSync(dir, { recursive: true });
  const building = `${file}.building-${process.pid}`;
  const started = Date.now();
  log(`prefill: building ${path.relative(ROOT, file)} (${count} plants, ${ids} ids) ...`);
  runCli(['migrate'], { DATABASE_URL: `sqlite:${building}` }, cliOf(root));
  const db = new DatabaseSync(building);
  try {
    db.exec('PRAGMA journal_mode = OFF');
    db.exec('PRAGMA synchronous = OFF');
    db.exec(`PRAGMA cache_size = -${PREFILL_CACHE_KIB}`);
    const insert = prepareWrite<[bigint, string, string | null]>(db, 'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)');
    transaction(db, () => {
      let k = 0;
      for (const id of ids === 'random' ? shuffledRandomIds(count) : prefilledIds(ids, count)) {
        insert.run(BigInt(id), NAMES[k % 4] as string, TAGS[k % 4] ?? null);
        k += 1;
      }
    });
    const stored = prepareValue<[], number>(db, 'SELECT count(*) FROM plants').get() ?? 0;
    if (stored !== count) throw new Error(`prefill stored ${stored} plants, expected ${count}`);
    // The service runs in WAL mode; leave the file as it would find it after a clean shutdown.
    db.exec('PRAGMA journal_mode = WAL');
  } finally {
    db.close();
  }
  fs.renameSync(building, file);
  const mb = Math.round(fs.statSync(file).size / 1e6);
  log(`prefill: built in ${((Date.now() - started) / 1000).toFixed(1)} s, ${mb} MB`);
  return file;
}

/** Rows per INSERT of the PostgreSQL prefill. */
const POSTGRES_BATCH = 50_000;

/**
 * Migrates the database at `databaseUrl` (with `env`, the service's environment) and inserts `count` plants with the
 * same ids as the SQLite prefill; names and tags follow the id (id % 4), not the row number.
 */
export async function prefillPostgres(databaseUrl: string, env: EnvOverrides, options: PrefillOptions): Promise<void> {
  const { count, ids, log } = options;
  runCli(['migrate'], env);
  log(`postgres: prefilling ${count} plants (${ids} ids) ...`);
  const started = Date.now();
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    let batch: string[] = [];
    const flush = async () => {
      if (batch.length === 0) return;
      await client.query(
        `INSERT INTO plants (id, name, tag)
         SELECT i, (ARRAY['Monstera deliciosa','Ficus lyrata','Pilea peperomioides','Calathea orbifolia'])[1 + (i % 4)],
                (ARRAY['aroid','fig','pilea',NULL])[1 + (i % 4)]
         FROM unnest($1::bigint[]) AS i`,
        [batch],
      );
      batch = [];
    };
    for (const id of prefilledIds(ids, count)) {
      batch.push(String(id));
      if (batch.length === POSTGRES_BATCH) await flush();
    }
    await flush();
    await client.query('VACUUM ANALYZE plants');
  } finally {
    await client.end();
  }
  log(`postgres: prefilled in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
