import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createDatabase, postgresServerUrl } from './postgres.js';

/** A fresh, empty database for one test, and how to remove it. */
export interface TestDatabase {
  readonly kind: 'sqlite' | 'postgres';
  readonly url: string;
  cleanup(): Promise<void>;
}

export async function sqliteDatabase(): Promise<TestDatabase> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'plantstore-test-'));
  return {
    kind: 'sqlite',
    url: `sqlite:${path.join(dir, 'plants.db')}`,
    cleanup: () => fs.rm(dir, { recursive: true, force: true }),
  };
}

/**
 * A fresh database on TEST_DATABASE_URL when set, otherwise on the run's embedded PostgreSQL server
 * (helpers/global-postgres.ts), or, for a file run without that global setup, on an embedded server of the file's own,
 * started on first use: the file calls stopPostgresAfterAll() (helpers/postgres.ts) at its top level.
 */
export async function postgresDatabase(): Promise<TestDatabase> {
  const database = await createDatabase(await postgresServerUrl());
  return { kind: 'postgres', url: database.url, cleanup: () => database.drop() };
}

/** Every store the service supports: suites that must hold on each run once per entry (see postgresDatabase). */
export const DATABASES = [
  { kind: 'sqlite', create: sqliteDatabase },
  { kind: 'postgres', create: postgresDatabase },
] as const;
