/**
 * The store a worker thread serves HTTP on: the one module that knows both the storage interfaces and how an
 * instance of several workers divides storage between its threads, so a change to either touches only this file.
 *
 * On PostgreSQL a worker opens the database itself, with its own pool (PG_POOL_SIZE connections per worker): the
 * server takes concurrent writers. On SQLite one connection writes for the whole instance, on the main thread, so
 * that every worker's creates join one group commit instead of contending for the file's write lock; a worker asks
 * the main thread for each write (a batch of creates is one message and one reply: ./wire.ts), and reads (plants,
 * tokens) on a read connection of its own, which WAL lets run beside the writer.
 */
import type Database from 'better-sqlite3';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../config.js';
import { StorageUnavailableError, unavailableIf } from '../storage/errors.js';
import { UNOBSERVED, type StorageObserver } from '../storage/observer.js';
import { openStore } from '../storage/open.js';
import { keysetFrom, toStoredPlant, type PlantRow } from '../storage/rows.js';
import { BUSY_TIMEOUT_MS, openConnection, unavailableKind } from '../storage/sqlite/connection.js';
import { SQLITE_LIST_QUERIES } from '../storage/sqlite/sqlite-store.js';
import type { CreateOutcome, PlantQuery, PlantToCreate, Store, StoredPlant, StoredToken, TokenInfo } from '../storage/store.js';
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
/** Retries of a read that meets a lock start 1 ms apart and back off to this. */
const LOCK_RETRY_MAX_MS = 25;

interface TokenRow {
  name: string;
  hash: Buffer;
}

interface TokenInfoRow {
  name: string;
  created_at: number;
  last_used_at: number | null;
}

function notInWorker(operation: string): Promise<never> {
  return Promise.reject(new Error(`${operation} is not done in a worker thread: the instance's main thread and the CLI do it`));
}

/**
 * A worker's SQLite store: reads on its own connection, writes through the main thread. What a worker does not do
 * (manage tokens and webhooks, move data, dispatch) is refused: those run on the main thread or in the CLI.
 */
class WorkerSqliteStore implements Store {
  readonly kind = 'sqlite';
  /** One batch in flight per worker: the next gathers what arrives while the writer commits this one. */
  readonly writeConcurrency = 1;
  readonly #reader: Database.Database;
  readonly #main: MainThread;
  readonly #statements;
  #observer: StorageObserver = UNOBSERVED;
  #closed = false;

  private constructor(reader: Database.Database, main: MainThread) {
    this.#reader = reader;
    this.#main = main;
    this.#statements = {
      getPlant: reader.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?').safeIntegers(true),
      listAll: reader.prepare<[bigint, number], PlantRow>(SQLITE_LIST_QUERIES.listAll).safeIntegers(true),
      listByTag: reader.prepare<[string, bigint, number], PlantRow>(SQLITE_LIST_QUERIES.listByTag).safeIntegers(true),
      listTokens: reader.prepare<[], TokenInfoRow>('SELECT name, created_at, last_used_at FROM tokens ORDER BY name'),
      findToken: reader.prepare<[Buffer], TokenRow>('SELECT name, hash FROM tokens WHERE hash = ?'),
      allTokens: reader.prepare<[], TokenRow>('SELECT name, hash FROM tokens'),
    };
  }

  /** The main thread has opened and migrated the database before any worker starts. */
  static open(file: string, main: MainThread): WorkerSqliteStore {
    let reader: Database.Database | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      // As on the main thread's connections: a lock is retried on a timer, never waited for on the event loop.
      reader.pragma('busy_timeout = 0');
      return new WorkerSqliteStore(reader, main);
    } catch (error) {
      reader?.close();
      throw unavailableIf(error, (cause) => unavailableKind(cause) !== undefined);
    }
  }

  observe(observer: StorageObserver): void {
    this.#observer = observer;
  }

  /** A read, retried on a timer while another connection holds a lock it needs (a WAL index rebuilt after a crash). */
  async #read<T>(work: () => T): Promise<T> {
    const deadline = performance.now() + BUSY_TIMEOUT_MS;
    for (let delay = 1; ; delay = Math.min(delay * 2, LOCK_RETRY_MAX_MS)) {
      if (this.#closed) {
        this.#observer.storageFailed('closed');
        throw new StorageUnavailableError('storage is closed');
      }
      try {
        return work();
      } catch (error) {
        const busy = String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY');
        if (!busy || performance.now() + delay > deadline) {
          const kind = unavailableKind(error);
          this.#observer.storageFailed(kind ?? 'other');
          throw unavailableIf(error, () => kind !== undefined);
        }
      }
      await sleep(delay);
    }
  }

  async createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]> {
    return unpackOutcomes(await this.#main.call('create', packPlants(plants)));
  }

  deletePlant(id: bigint): Promise<boolean> {
    return this.#main.call('delete', id);
  }

  checkWritable(): Promise<void> {
    return this.#main.call('checkWritable', undefined);
  }

  recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    return this.#main.call('recordTokenUse', uses);
  }

  getPlant(id: bigint): Promise<StoredPlant | undefined> {
    return this.#read(() => {
      const row = this.#statements.getPlant.get(id);
      return row && toStoredPlant(row);
    });
  }

  listPlants(query: PlantQuery): Promise<StoredPlant[]> {
    const from = keysetFrom(query.after);
    if (from === undefined) return Promise.resolve([]);
    return this.#read(() =>
      (query.tag === undefined
        ? this.#statements.listAll.all(from, query.limit)
        : this.#statements.listByTag.all(query.tag, from, query.limit)
      ).map(toStoredPlant),
    );
  }

  findToken(hash: Buffer): Promise<StoredToken | undefined> {
    return this.#read(() => this.#statements.findToken.get(hash));
  }

  allTokens(): Promise<StoredToken[]> {
    return this.#read(() => this.#statements.allTokens.all());
  }

  listTokens(): Promise<TokenInfo[]> {
    return this.#read(() =>
      this.#statements.listTokens.all().map((row) => ({
        name: row.name,
        createdAt: new Date(row.created_at),
        lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
      })),
    );
  }

  /** Nothing runs in the background here: the main thread's store has the checkpointer and reports its incidents. */
  onIncident(): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#reader.open) this.#reader.close();
  }

  addToken = () => notInWorker('addToken');
  revokeToken = () => notInWorker('revokeToken');
  exportTokens = () => notInWorker('exportTokens');
  importTokens = () => notInWorker('importTokens');
  addWebhook = () => notInWorker('addWebhook');
  listWebhooks = () => notInWorker('listWebhooks');
  removeWebhook = () => notInWorker('removeWebhook');
  setWebhookEnabled = () => notInWorker('setWebhookEnabled');
  rotateWebhookSecret = () => notInWorker('rotateWebhookSecret');
  webhookDeliveries = () => notInWorker('webhookDeliveries');
  redeliverWebhookEvent = () => notInWorker('redeliverWebhookEvent');
  activeWebhooks = () => notInWorker('activeWebhooks');
  settleAndClaimWebhookEvents = () => notInWorker('settleAndClaimWebhookEvents');
  releaseWebhookLeases = () => notInWorker('releaseWebhookLeases');
  countWaitingWebhookEvents = () => notInWorker('countWaitingWebhookEvents');
  pruneWebhookEvents = () => notInWorker('pruneWebhookEvents');
  exportWebhooks = () => notInWorker('exportWebhooks');
  importWebhooks = () => notInWorker('importWebhooks');
}
