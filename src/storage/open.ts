import fs from 'node:fs';
import type { DatabaseConfig } from '../config/config.js';
import { DatabaseMissingError } from './errors.js';
import { SqliteStore } from './sqlite/sqlite-store.js';
import { DelegatingSqliteStore } from './sqlite/delegating-store.js';
import type { DelegatedWrites, ServingStore, Store } from './store.js';

/** How a command wants its database opened; each command decides (src/cli/commands/). */
export interface OpenOptions {
  /**
   * A SQLite database file that does not exist is refused with DatabaseMissingError, and nothing is created, not
   * even its folder: for commands that only read or copy out. PostgreSQL databases are never created by plantstore.
   */
  readonly mustExist?: boolean;
  /** Called with the file's absolute path when opening created a new SQLite database. */
  readonly onCreated?: (file: string) => void;
}

/**
 * Whether a SQLite database file exists at `file`. Only "no such file" counts as absent: a file that cannot be
 * looked at (no permission on its folder) is left to SQLite's open, which reports that as it does.
 */
export function sqliteFileExists(file: string): boolean {
  try {
    fs.statSync(file);
    return true;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    return true;
  }
}

/** Refuses (DatabaseMissingError) a SQLite database file that does not exist. */
export function requireSqliteFile(file: string): void {
  if (!sqliteFileExists(file)) throw new DatabaseMissingError(file);
}

/** Opens the configured store with its schema migrated to the current version. */
export async function openStore(database: DatabaseConfig, options: OpenOptions = {}): Promise<Store> {
  switch (database.kind) {
    case 'sqlite': {
      // database.path is absolute (config.ts resolves it against the working directory).
      const existed = sqliteFileExists(database.path);
      if (!existed && options.mustExist) throw new DatabaseMissingError(database.path);
      const store = SqliteStore.open(database.path);
      if (!existed) options.onCreated?.(database.path);
      return store;
    }
    case 'postgres': {
      // Loaded only when configured, so a SQLite deployment never loads pg.
      const { PostgresStore } = await import('./postgres/postgres-store.js');
      return PostgresStore.open(database);
    }
  }
}

/**
 * The store a worker thread of an instance serves on, the database already opened and migrated by the main thread.
 * PostgreSQL takes concurrent writers: the worker opens it with its own pool. SQLite has one writer for the
 * instance: the worker reads on a connection of its own (WAL lets it read beside the writer), answers each read once
 * the writer's `durableMark` says every commit it could have seen is durable, and hands every write to `writes`.
 */
export async function openServingStore(database: DatabaseConfig, writes: DelegatedWrites, durableMark?: SharedArrayBuffer): Promise<ServingStore> {
  if (database.kind === 'postgres') return openStore(database);
  if (durableMark === undefined) throw new Error('a worker thread on SQLite needs the writer\'s durable mark');
  return DelegatingSqliteStore.open(database.path, writes, durableMark);
}
