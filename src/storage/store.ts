import type { StorageObserver } from './observer.js';
import type { TokenStore } from './token-store.js';
import type { WebhookStore } from './webhook-store.js';

/**
 * The storage interfaces. Each consumer sees only what it needs: the write queue and the plant service a
 * PlantStore, readiness a WritableCheck, the token cache a TokenLookup (./token-store.ts), the webhook dispatcher a
 * WebhookOutbox (./webhook-store.ts). Both databases implement all of them as one Store;
 * test/storage-contract.test.ts holds the two to the same rules. Rows of either database are mapped to these types
 * before they leave storage, and failures are storage's own errors (./errors.ts), never HTTP ones.
 */
export interface StoredPlant {
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}

export type PlantToCreate = StoredPlant;

export interface PlantQuery {
  readonly limit: number;
  readonly after?: bigint;
  readonly tag?: string;
}

export type CreateOutcome =
  | { readonly status: 'created' }
  | { readonly status: 'exists'; readonly stored: StoredPlant }
  /** This row alone could not be stored; the rest of its batch is unaffected. */
  | { readonly status: 'failed'; readonly error: Error };

export interface PlantStore {
  /**
   * Stores new plants, each committed durably before the promise resolves. SQLite commits the call as one
   * transaction; PostgreSQL as one insert statement, plus a read of ids already stored and a retry for any deleted
   * in between, each committing on its own. The promise rejects only when nothing was stored; a failure after some
   * rows committed fails the rest row by row. A repeated id is created once and its later copies are answered as
   * the first left it. An id already stored is left as it is and reported with its stored content.
   */
  createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]>;
  getPlant(id: bigint): Promise<StoredPlant | undefined>;
  /** Plants in ascending id order, strictly after `after` when given (keyset paging), only with `tag` when given. */
  listPlants(query: PlantQuery): Promise<StoredPlant[]>;
  /** Resolves false when no plant has that id; committed durably before it resolves. */
  deletePlant(id: bigint): Promise<boolean>;
}

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
 * One open database: every interface above, its tokens and its webhooks as sub-stores of their own, what it can do,
 * what it notices by itself, and how to let it go.
 */
export interface Store extends PlantStore, WritableCheck {
  readonly kind: 'sqlite' | 'postgres';
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
