/**
 * What storage raises. Storage knows nothing of HTTP: these say what went wrong in storage's own words, and the
 * edge (src/http/error-reply.ts) decides what a client is told.
 */

/**
 * What went wrong in storage, in the words an operator acts on: the `kind` of plantstore_storage_errors_total. Each
 * store names the kind of its own driver's errors; `other` is an error it does not take for "not now", likely a bug.
 */
export const STORAGE_ERROR_KINDS = [
  /** Another connection or process holds a lock past the wait (or PostgreSQL gave up on a deadlock or serialization). */
  'locked',
  'disk_full',
  'read_only',
  /** Memory, connection slots or other server resources ran out. */
  'resources',
  /** The file or the server's storage failed: I/O errors, corruption, a file that cannot be opened. */
  'io',
  /** The database cannot be reached, refused the credentials, does not exist or is shutting down. */
  'connection',
  'timeout',
  /** The store was used after it was closed (shutting down). */
  'closed',
  'other',
] as const;

export type StorageErrorKind = (typeof STORAGE_ERROR_KINDS)[number];

/** Storage cannot serve now (unreachable, disk full, locked, read-only, closed); a retry later may work. */
export class StorageUnavailableError extends Error {
  constructor(message = 'storage is unavailable; retry shortly', options?: ErrorOptions) {
    super(message, options);
    this.name = 'StorageUnavailableError';
  }
}

export class DuplicateTokenNameError extends Error {
  constructor(name: string) {
    super(`a token named ${JSON.stringify(name)} already exists`);
    this.name = 'DuplicateTokenNameError';
  }
}

/**
 * `error` as StorageUnavailableError, with the original as its cause, when the store's own classifier says it means
 * "not now" (each database spells that differently); anything else as it is.
 */
export function unavailableIf(error: unknown, isUnavailable: (error: unknown) => boolean): unknown {
  return isUnavailable(error) ? new StorageUnavailableError(undefined, { cause: error }) : error;
}

/** A file offered as a SQLite database (a backup to restore, a copy just made) that is not a whole, healthy plantstore database. */
export class UnusableDatabaseFileError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UnusableDatabaseFileError';
  }
}

/** The database is open in another process (a running server, another command), so it cannot be replaced now. */
export class DatabaseInUseError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'DatabaseInUseError';
  }
}

export class DuplicateWebhookNameError extends Error {
  constructor(name: string) {
    super(`a webhook subscription named ${JSON.stringify(name)} already exists`);
    this.name = 'DuplicateWebhookNameError';
  }
}

/**
 * A command that only reads or copies out was pointed at a SQLite database file that does not exist: a mistyped
 * DATABASE_URL or another working directory, which must not quietly become a new, empty database.
 */
export class DatabaseMissingError extends Error {
  constructor(file: string) {
    super(`no SQLite database at ${file}: check DATABASE_URL (a relative sqlite: path is read from the working directory)`);
    this.name = 'DatabaseMissingError';
  }
}
