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

/**
 * What storage lets a tracer see of its statements: src/tracing/ implements it, src/services.ts hands it to the store
 * (Store.traceQueries) as it hands metrics their observer, so storage reads no tracing state of its own.
 */
export interface QueryTracer {
  /** Runs one statement, `text` its SQL (never its values): a client span when run inside a traced request. */
  query<T>(text: string, run: () => Promise<T>): Promise<T>;
}
