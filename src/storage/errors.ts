/**
 * What storage raises. Storage knows nothing of HTTP: these say what went wrong in storage's own words, and the
 * edge (src/http/error-reply.ts) decides what a client is told.
 */

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
