import type { StorageErrorKind } from './errors.js';

/**
 * What storage reports to whoever watches it: src/observability/metrics.ts implements these, src/services.ts wires them. Storage
 * knows no metrics library; an observer's methods are called on the request path, so they must be cheap and never throw.
 */
export interface StorageObserver {
  /** A store operation failed for good, after any retries of its own. */
  storageFailed(kind: StorageErrorKind): void;
}

/** For a store nobody watches. */
export const UNOBSERVED: StorageObserver = {
  storageFailed: () => undefined,
};
