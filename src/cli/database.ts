/** How commands reach the database DATABASE_URL names, and how they name it to the operator. */
import type { Config, DatabaseConfig } from '../config/config.js';
import { openStore, type OpenOptions } from '../storage/open.js';
import type { Store } from '../storage/store.js';
import { WrongDatabaseError } from './errors.js';

/** Said once on stderr by every command that made a new SQLite database, so a mistyped path shows at once. */
export function reportCreated(file: string): void {
  process.stderr.write(`created a new database at ${file}\n`);
}

/** For commands that only read, change what exists, or copy out: a SQLite file that does not exist is refused. */
export const EXISTING_DATABASE: OpenOptions = { mustExist: true };

/** For commands that may start a database (serve, migrate, token create, import, webhook add, restore, copy's target). */
export const NEW_OR_EXISTING_DATABASE: OpenOptions = { onCreated: reportCreated };

/** Opens the configured store as `options` say, runs `work` on it, and closes it whatever happens. */
export async function withStore<T>(config: Config, options: OpenOptions, work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(config.database, options);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

/** A database as the operator knows it, for messages: a PostgreSQL URL without its password. */
export function describeDatabase(database: DatabaseConfig): string {
  if (database.kind === 'sqlite') return `SQLite ${database.path}`;
  const url = new URL(database.url);
  if (url.password !== '') url.password = '***';
  return `PostgreSQL ${url.toString()}`;
}

/** The SQLite file of a command that works on files (backup, restore); on PostgreSQL, where to look instead. */
export function sqlitePathFor(config: Config, command: string): string {
  if (config.database.kind === 'sqlite') return config.database.path;
  throw new WrongDatabaseError(
    `${command} works on a SQLite database, and DATABASE_URL is PostgreSQL, whose own tools do this consistently while it serves: ` +
      '(umask 077 && pg_dump --format=custom --file=FILE "$DATABASE_URL") to back up (the dump holds token hashes and webhook secrets), pg_restore --clean --if-exists --dbname="$DATABASE_URL" FILE to restore',
  );
}
