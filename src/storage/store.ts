import type { ChangeLog, ChangeRetention } from './change-store.js';
import type { QueryTracer, StorageObserver } from './observer.js';
import type { PlantStore } from './plant-store.js';
import type { CreateOutcome } from './plant-store.js';
import type { Plant } from '../plant.js';
import type { TokenLookup, TokenStore } from './token-store.js';
import type { WebhookOutbox, WebhookSubscriptionStore } from './webhook-store.js';

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
 * How a store whose commits are made durable by a separate sync (SQLite: the WAL's fdatasync off the event loop)
 * paces the write queue: while a sync is in flight, the next batch waits and commits when it returns, so that each
 * sync covers one batch gathered meanwhile, as large as the sync took long, rather than many small ones.
 */
export interface CommitPacing {
  /** True while a sync is in flight. */
  readonly syncing: boolean;
  /** Calls `listener` each time a sync has returned, before the next one starts (and once when storage fails). */
  afterSync(listener: () => void): () => void;
}

/**
 * What the services of one event loop (src/services.ts) use of storage: the write queue and the plant service a
 * PlantStore, the token cache a TokenLookup, readiness a WritableCheck, metrics its failures and its pool. A Store is
 * one; a worker thread of a SQLite instance serves on one that reads for itself and writes through the instance's
 * writer (./sqlite/delegating-store.ts, opened by ./open.ts openServingStore).
 */
export interface ServingStore extends WritableCheck {
  readonly plants: PlantStore;
  readonly tokens: TokenLookup;
  /** The change log the feed reads (./change-store.ts). */
  readonly changes: ChangeLog;
  /** Batches of creates this store can usefully commit at once: 1 for a single-writer database. */
  readonly writeConcurrency: number;
  /** When batches should commit, for a store that syncs apart from its commits (CommitPacing). */
  readonly commitPacing?: CommitPacing;
  /**
   * The durable mark in shared memory (SQLite: the commits begun and the highest one durable), which a worker thread's
   * store reads to show nothing that is not durable yet (./sqlite/durable-mark.ts).
   */
  readonly durableMark?: SharedArrayBuffer;
  /** As Store's: reports every failure from now on to `observer`. */
  observe?(observer: StorageObserver): void;
  /**
   * Runs every statement from now on through `tracer` (replacing the previous one), for a store whose statements are
   * worth a span of their own (PostgreSQL's travel to a server); until called, none is traced.
   */
  traceQueries?(tracer: QueryTracer): void;
  /** As Store's: the pool's state now, for a store that has a pool of connections. */
  connectionPoolState?(): ConnectionPoolState;
  /** As Store's, for a store that does work in the background; one that does none has nothing to report. */
  onIncident?(listener: (incident: StorageIncident) => void): () => void;
  close(): Promise<void>;
}

/**
 * The writes a store that only reads hands to the store that writes: in an instance of several threads on SQLite,
 * a worker thread's to the main thread's (one message per call, a batch of creates being one call). Shaped as the
 * write side of each sub-store, which the reading store takes as its own (./sqlite/delegating-store.ts): plain
 * functions, called without their object.
 */
export interface DelegatedWrites {
  readonly plants: {
    /** traceparents as PlantStore.create takes them: each plant's, for the webhook event it writes. */
    readonly create: (plants: readonly Plant[], traceparents?: readonly (string | undefined)[]) => Promise<CreateOutcome[]>;
    readonly delete: (id: bigint) => Promise<boolean>;
  };
  readonly tokens: { readonly recordUse: (uses: ReadonlyMap<string, Date>) => Promise<void> };
  readonly checkWritable: () => Promise<void>;
}

/**
 * One open database: its sub-stores (plants, tokens, webhook subscriptions and their outbox), and what belongs to the whole: which database it is,
 * how many batches it commits at once, whether it can take writes now, what it notices by itself, and how to let it
 * go.
 */
export interface Store extends ServingStore {
  readonly kind: 'sqlite' | 'postgres';
  readonly plants: PlantStore;
  readonly tokens: TokenStore;
  readonly webhookSubscriptions: WebhookSubscriptionStore;
  readonly webhookOutbox: WebhookOutbox;
  /** The change log, with its pruning (one process prunes: the one that opened the store). */
  readonly changes: ChangeLog & ChangeRetention;
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
