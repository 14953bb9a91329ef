/**
 * A SQLite store that reads for itself and hands every write to another store: the store a worker thread of an
 * instance serves on (./../open.ts openServingStore). One connection writes for the whole instance, on its main
 * thread, so that every thread's creates join one group commit instead of contending for the file's write lock; the
 * worker reads plants and tokens on a read connection of its own, which WAL lets run beside the writer. The writer
 * is the main thread's SqliteStore, so every write handed to it passes that store's check that the file at the path
 * is the one open.
 */
import type { StorageObserver } from '../observer.js';
import type { CreateOutcome, PlantStore } from '../plant-store.js';
import type { Plant } from '../../plants/plant.js';
import type { DelegatedWrites, ServingStore } from '../store.js';
import type { TokenLookup } from '../token-store.js';
import { openConnection, translateSqliteError, type Connection, type ReadRunner } from './connection.js';
import { LockRetry } from './lock-retry.js';
import { SqlitePlantReads } from './plants.js';
import { SqliteTokenReads } from './tokens.js';

/** The read connection's page cache, as the single-threaded store's reader has. */
const READER_CACHE_MIB = 16;

/** Plants: reads on this store's connection (as SqlitePlants reads), creates and deletes by the writer. */
class DelegatingPlants extends SqlitePlantReads implements PlantStore {
  readonly #writes: DelegatedWrites;

  constructor(reader: Connection, read: ReadRunner, writes: DelegatedWrites) {
    super(reader, read);
    this.#writes = writes;
  }

  create(plants: readonly Plant[], traceparents?: readonly (string | undefined)[]): Promise<CreateOutcome[]> {
    return this.#writes.create(plants, traceparents);
  }

  delete(id: bigint): Promise<boolean> {
    return this.#writes.delete(id);
  }
}

/** What the token cache needs: find and all on this store's connection (as SqliteTokens reads), uses recorded by the writer. */
class DelegatingTokens extends SqliteTokenReads implements TokenLookup {
  readonly #writes: DelegatedWrites;

  constructor(reader: Connection, read: ReadRunner, writes: DelegatedWrites) {
    super(reader, read);
    this.#writes = writes;
  }

  recordUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    return this.#writes.recordTokenUse(uses);
  }
}

export class DelegatingSqliteStore implements ServingStore {
  /** One batch in flight: the next gathers what arrives while the writer commits this one. */
  readonly writeConcurrency = 1;
  readonly plants: PlantStore;
  readonly tokens: TokenLookup;
  readonly #reader: Connection;
  readonly #writes: DelegatedWrites;
  readonly #locks = new LockRetry();

  private constructor(reader: Connection, writes: DelegatedWrites) {
    this.#reader = reader;
    this.#writes = writes;
    const read: ReadRunner = (work) => this.#locks.run(work);
    this.plants = new DelegatingPlants(reader, read, writes);
    this.tokens = new DelegatingTokens(reader, read, writes);
  }

  /** The writer has opened and migrated the database before this opens it. */
  static open(file: string, writes: DelegatedWrites): DelegatingSqliteStore {
    let reader: Connection | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      // As on the writer's connections: a lock is retried on a timer, never waited for on the event loop.
      reader.exec('PRAGMA busy_timeout = 0');
      return new DelegatingSqliteStore(reader, writes);
    } catch (error) {
      reader?.close();
      throw translateSqliteError(error);
    }
  }

  observe(observer: StorageObserver): void {
    this.#locks.observer = observer;
  }

  checkWritable(): Promise<void> {
    return this.#writes.checkWritable();
  }

  async close(): Promise<void> {
    if (this.#locks.closed) return;
    this.#locks.closed = true;
    if (this.#reader.isOpen) this.#reader.close();
  }
}
