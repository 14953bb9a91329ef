import Database from 'better-sqlite3';

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

/** SQLite error codes meaning "not now" (disk full, locked, read-only, I/O) rather than a bug. */
export const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL|NOMEM|CORRUPT|NOTADB)/;
