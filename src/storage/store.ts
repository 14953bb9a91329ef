import type { StorageObserver } from './observer.js';
import type { PlantStore } from './plant-store.js';
import type { TokenStore } from './token-store.js';
import type { WebhookStore } from './webhook-store.js';

/**
 * The storage interfaces. Each consumer sees only what it needs: the write queue and the plant service a
 * PlantStore (./plant-store.ts), the token cache a TokenLookup (./token-store.ts), readiness a WritableCheck, the
 * webhook dispatcher a WebhookOutbox (./webhook-store.ts). Both databases implement all of them as one Store;
 * test/storage/storage-contract.test.ts holds the two to the same rules. Rows of either database are mapped to these
 * types before they leave storage, and failures are storage's own errors (./errors.ts), never HTTP ones.
 */
export interface WritableCheck {
  /**
   * Resolves once a one-row heartbeat write has been committed durably, proving the store can take writes now (a
   * read alone would pass on a full disk, a locked file or a read-only database); rejects with
   * StorageUnavailableError otherwise, within a bounded time.
   */
  checkWritable(): Promise<void>;
}

/** Something storage noticed by itself, outside any request (a background thread died, checkpoints keep failing). */
export interface StorageIncident {
  readonly level: 'error' | 'warn' | 'info';
  readonly message: string;
  readonly error?: Error;
}

/** A connection pool's state at one moment. */
export interface ConnectionPoolState {
  /** Connections open, idle or in use. */
  readonly total: number;
  readonly idle: number;
  /** Queries waiting for a connection. */
  readonly waiting: number;
}

/**
 * One open database: its sub-stores (plants, tokens, webhooks), and what belongs to the whole: which database it is,
 * how many batches it commits at once, whether it can take writes now, what it notices by itself, and how to let it
 * go.
 */
export interface Store extends WritableCheck {
  readonly kind: 'sqlite' | 'postgres';
  readonly plants: PlantStore;
  readonly tokens: TokenStore;
  readonly webhooks: WebhookStore;
  /** Batches of creates this store can usefully commit at once: 1 for a single-writer database. */
  readonly writeConcurrency: number;
  /**
   * Calls `listener` with every incident from now on, and with those that happened before anyone listened; returns
   * the function that stops it. Storage has no logger of its own: services.ts logs what it hears here.
   */
  onIncident(listener: (incident: StorageIncident) => void): () => void;
  /**
   * Reports every failure from now on to `observer` (replacing the previous one); until called, nobody is told. Both
   * databases have it; a store that stands in for one and cannot fail (bench/app-only.ts) may leave it out.
   */
  observe?(observer: StorageObserver): void;
  /** The pool's state now, for a store that has a pool of connections (PostgreSQL); cheap, read when metrics are scraped. */
  connectionPoolState?(): ConnectionPoolState;
  close(): Promise<void>;
}
