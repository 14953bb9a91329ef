/**
 * The store a worker thread serves HTTP on: the one module that knows both the storage interfaces and how an
 * instance of several workers divides storage between its threads, so a change to either touches only this file.
 *
 * On PostgreSQL a worker opens the database itself, with its own pool (PG_POOL_SIZE connections per worker): the
 * server takes concurrent writers. On SQLite one connection writes for the whole instance, on the main thread, so
 * that every worker's creates join one group commit instead of contending for the file's write lock; a worker asks
 * the main thread for each write (a batch of creates is one message and one reply: ./wire.ts), and reads (plants,
 * tokens) on a read connection of its own, which WAL lets run beside the writer. The main thread's writer is its
 * SqliteStore, so every write a worker asks for passes that store's check that the file at the path is the one open.
 */
import type { Config } from '../config.js';
import type { StorageObserver } from '../storage/observer.js';
import { openStore } from '../storage/open.js';
import type { CreateOutcome, Plant, PlantStore } from '../storage/plant-store.js';
import { openConnection, translateSqliteError, type Connection, type Unlocked } from '../storage/sqlite/connection.js';
import { LockRetry } from '../storage/sqlite/lock-retry.js';
import { SqlitePlantReads } from '../storage/sqlite/plants.js';
import { SqliteTokenReads } from '../storage/sqlite/tokens.js';
import type { Store } from '../storage/store.js';
import type { TokenStore } from '../storage/token-store.js';
import type { WebhookStore } from '../storage/webhook-store.js';
import type { MainOperations, WorkerOperations } from './protocol.js';
import type { Endpoint } from './rpc.js';
import { packPlants, unpackOutcomes } from './wire.js';

export type MainThread = Endpoint<MainOperations, WorkerOperations>;

export async function openWorkerStore(config: Config, main: MainThread): Promise<Store> {
  const { database } = config;
  return database.kind === 'postgres' ? openStore(database) : WorkerSqliteStore.open(database.path, main);
}

/** The read connection's page cache, as the single-threaded store's reader has. */
const READER_CACHE_MIB = 16;

function notInWorker(operation: string): Promise<never> {
  return Promise.reject(new Error(`${operation} is not done in a worker thread: the instance's main thread and the CLI do it`));
}

/** Plants in a worker: reads on the worker's connection (as SqlitePlants reads), creates and deletes by the main thread's writer. */
class WorkerSqlitePlants extends SqlitePlantReads implements PlantStore {
  readonly #main: MainThread;

  constructor(reader: Connection, read: Unlocked, main: MainThread) {
    super(reader, read);
    this.#main = main;
  }

  async create(plants: readonly Plant[]): Promise<CreateOutcome[]> {
    return unpackOutcomes(await this.#main.call('create', packPlants(plants)));
  }

  delete(id: bigint): Promise<boolean> {
    return this.#main.call('delete', id);
  }
}

/**
 * Tokens in a worker: what the token cache needs (find and all on the worker's connection, as SqliteTokens reads;
 * uses recorded through the main thread's writer) and the list `serve` checks at start; adding, revoking and moving
 * tokens is the CLI's.
 */
class WorkerSqliteTokens extends SqliteTokenReads implements TokenStore {
  readonly #main: MainThread;

  constructor(reader: Connection, read: Unlocked, main: MainThread) {
    super(reader, read);
    this.#main = main;
  }

  recordUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    return this.#main.call('recordTokenUse', uses);
  }

  add = () => notInWorker('tokens.add');
  revoke = () => notInWorker('tokens.revoke');
  exportAll = () => notInWorker('tokens.exportAll');
  importAll = () => notInWorker('tokens.importAll');
}

/** Webhooks in a worker: none. The instance's one dispatcher runs on the main thread; subscriptions are the CLI's. */
const NO_WEBHOOKS_IN_WORKER: WebhookStore = {
  add: () => notInWorker('webhooks.add'),
  list: () => notInWorker('webhooks.list'),
  remove: () => notInWorker('webhooks.remove'),
  setEnabled: () => notInWorker('webhooks.setEnabled'),
  rotateSecret: () => notInWorker('webhooks.rotateSecret'),
  deliveries: () => notInWorker('webhooks.deliveries'),
  redeliver: () => notInWorker('webhooks.redeliver'),
  active: () => notInWorker('webhooks.active'),
  settleAndClaim: () => notInWorker('webhooks.settleAndClaim'),
  releaseLeases: () => notInWorker('webhooks.releaseLeases'),
  countWaiting: () => notInWorker('webhooks.countWaiting'),
  prune: () => notInWorker('webhooks.prune'),
  exportAll: () => notInWorker('webhooks.exportAll'),
  importAll: () => notInWorker('webhooks.importAll'),
};

/** A worker's SQLite store: reads on its own connection, writes through the main thread. */
class WorkerSqliteStore implements Store {
  readonly kind = 'sqlite';
  /** One batch in flight per worker: the next gathers what arrives while the writer commits this one. */
  readonly writeConcurrency = 1;
  readonly plants: PlantStore;
  readonly tokens: TokenStore;
  readonly webhooks = NO_WEBHOOKS_IN_WORKER;
  readonly #reader: Connection;
  readonly #main: MainThread;
  readonly #locks = new LockRetry();

  private constructor(reader: Connection, main: MainThread) {
    this.#reader = reader;
    this.#main = main;
    const read: Unlocked = (work) => this.#read(work);
    this.plants = new WorkerSqlitePlants(reader, read, main);
    this.tokens = new WorkerSqliteTokens(reader, read, main);
  }

  /** The main thread has opened and migrated the database before any worker starts. */
  static open(file: string, main: MainThread): WorkerSqliteStore {
    let reader: Connection | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      // As on the main thread's connections: a lock is retried on a timer, never waited for on the event loop.
      reader.exec('PRAGMA busy_timeout = 0');
      return new WorkerSqliteStore(reader, main);
    } catch (error) {
      reader?.close();
      throw translateSqliteError(error);
    }
  }

  observe(observer: StorageObserver): void {
    this.#locks.observer = observer;
  }

  /** A read, retried on a timer while another connection holds a lock it needs (a WAL index rebuilt after a crash). */
  #read<T>(work: () => T): Promise<T> {
    return this.#locks.run(work);
  }

  checkWritable(): Promise<void> {
    return this.#main.call('checkWritable', undefined);
  }

  /** Nothing runs in the background here: the main thread's store has the checkpointer and reports its incidents. */
  onIncident(): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    if (this.#locks.closed) return;
    this.#locks.closed = true;
    if (this.#reader.isOpen) this.#reader.close();
  }
}
