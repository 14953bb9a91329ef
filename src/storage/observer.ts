import type { StorageErrorKind } from './errors.js';

/**
 * What storage reports to whoever watches it: src/metrics.ts implements these, src/services.ts wires them. Storage
 * knows no metrics library; an observer's methods are called on the request path, so they must be cheap and never throw.
 */
export interface StorageObserver {
  /** A store operation failed for good, after any retries of its own. */
  storageFailed(kind: StorageErrorKind): void;
}

export interface WriteQueueObserver {
  /** The store answered a batch of creates (committed, though single rows may have failed alone) and how long it took. */
  batchCommitted(rows: number, seconds: number): void;
}

/** For a store or queue nobody watches. */
export const UNOBSERVED: StorageObserver & WriteQueueObserver = {
  storageFailed: () => undefined,
  batchCommitted: () => undefined,
};
