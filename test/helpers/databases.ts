import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

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

export async function postgresDatabase(): Promise<TestDatabase> {
  throw new Error('PostgreSQL test databases are not available yet');
}

/** Every store the service supports: suites that must hold on each run once per entry. */
export const DATABASES = [
  { kind: 'sqlite', create: sqliteDatabase },
  { kind: 'postgres', create: postgresDatabase },
] as const;
