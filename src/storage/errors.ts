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

export class DuplicateWebhookNameError extends Error {
  constructor(name: string) {
    super(`a webhook subscription named ${JSON.stringify(name)} already exists`);
    this.name = 'DuplicateWebhookNameError';
  }
}
