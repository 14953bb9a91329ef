import Database from 'better-sqlite3';
import type { StorageErrorKind } from '../errors.js';

/** How long a write waits for another connection's lock (a CLI command, another process) before SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;

/**
 * One connection with this service's settings: WAL, and synchronous=FULL so a commit returns only after the
 * WAL is fsync'd. `cacheMiB` is this connection's page cache: random-id inserts touch pages all over the
 * primary key, and a cache that holds them saves a read per insert. Opening waits up to BUSY_TIMEOUT_MS for
 * another connection's lock; the server's connections then wait 0 and retry on a timer instead (SqliteStore).
 */
export function openConnection(file: string, cacheMiB: number): Database.Database {
  const db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma(`cache_size = -${cacheMiB * 1024}`);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** SQLite error codes (extended ones included, by prefix) meaning "not now" rather than a bug, by kind. */
const UNAVAILABLE_CODES: ReadonlyArray<readonly [RegExp, StorageErrorKind]> = [
  [/^SQLITE_(BUSY|LOCKED)/, 'locked'],
  [/^SQLITE_FULL/, 'disk_full'],
  [/^SQLITE_READONLY/, 'read_only'],
  [/^SQLITE_NOMEM/, 'resources'],
  [/^SQLITE_(IOERR|CANTOPEN|PROTOCOL|CORRUPT|NOTADB)/, 'io'],
];

/** The kind of a SQLite error meaning "not now" (disk full, locked, read-only, I/O); undefined for anything else. */
export function unavailableKind(error: unknown): StorageErrorKind | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return undefined;
  return UNAVAILABLE_CODES.find(([pattern]) => pattern.test(code))?.[1];
}
