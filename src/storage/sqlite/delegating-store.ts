/**
 * A SQLite store that reads for itself and hands every write to another store: the store a worker thread of an
 * instance serves on (./../open.ts openServingStore). One connection writes for the whole instance, on its main
 * thread, so that every thread's creates join one group commit instead of contending for the file's write lock; the
 * worker reads plants and tokens on a read connection of its own, which WAL lets run beside the writer. The writer
 * is the main thread's SqliteStore, so every write handed to it passes that store's check that the file at the path
 * is the one open, and is answered once the writer's sync covers it. A read is answered once every commit it could
 * have seen is durable: the writer's durable mark, in shared memory (./durable-mark.ts), says so.
 */
import type { StorageObserver } from '../observer.js';
import type { PlantStore } from '../plant-store.js';
import type { DelegatedWrites, ServingStore } from '../store.js';
import type { TokenLookup } from '../token-store.js';
import { openConnection, translateSqliteError, type Connection, type ReadRunner } from './connection.js';
import { DurableMarkReader } from './durable-mark.js';
import { StatementRunner } from './statement-runner.js';
import { SqliteChangeReads } from './changes.js';
import { SqlitePlantReads } from './plants.js';
import { SqliteTokenReads } from './tokens.js';

/** Batches of creates a worker thread hands over before the first is answered (writeConcurrency). */
const DELEGATED_BATCHES_IN_FLIGHT = 4;

/** The read connection's page cache, as the single-threaded store's reader has. */
const READER_CACHE_MIB = 16;

/** Plants: reads on this store's connection (as SqlitePlants reads); create and delete are the writer's own. */
class DelegatingPlants extends SqlitePlantReads implements PlantStore {
  readonly create: DelegatedWrites['plants']['create'];
  readonly delete: DelegatedWrites['plants']['delete'];

  constructor(reader: Connection, read: ReadRunner, writes: DelegatedWrites['plants']) {
    super(reader, read);
    this.create = writes.create;
    this.delete = writes.delete;
  }
}

/** What the token cache needs: find and all on this store's connection (as SqliteTokens reads); recordUse is the writer's own. */
class DelegatingTokens extends SqliteTokenReads implements TokenLookup {
  readonly recordUse: DelegatedWrites['tokens']['recordUse'];

  constructor(reader: Connection, read: ReadRunner, writes: DelegatedWrites['tokens']) {
    super(reader, read);
    this.recordUse = writes.recordUse;
  }
}

export class DelegatingSqliteStore implements ServingStore {
  /**
   * Batches handed over and not yet answered. The writer holds every batch that arrives while its sync runs and
   * commits them together when it returns (CommitPacing), so handing a turn's creates over at once costs no commit;
   * with one in flight, creates arriving meanwhile would miss the writer's next commit and wait a whole sync more.
   */
  readonly writeConcurrency = DELEGATED_BATCHES_IN_FLIGHT;
  readonly plants: PlantStore;
  readonly tokens: TokenLookup;
  /** Read on this store's connection; commits are heard from the instance's writer (src/workers/), not here. */
  readonly changes: SqliteChangeReads;
  /** The writer's: a heartbeat committed on the connection that writes proves what readiness asks. */
  readonly checkWritable: DelegatedWrites['checkWritable'];
  readonly #reader: Connection;
  readonly #runner = new StatementRunner();

  private constructor(reader: Connection, writes: DelegatedWrites, mark: DurableMarkReader) {
    this.#reader = reader;
    const read: ReadRunner = async (work) => {
      const result = await this.#runner.run(work);
      await mark.durable();
      return result;
    };
    this.plants = new DelegatingPlants(reader, read, writes.plants);
    this.tokens = new DelegatingTokens(reader, read, writes.tokens);
    this.changes = new SqliteChangeReads(reader, read);
    this.checkWritable = writes.checkWritable;
  }

  /** The writer has opened and migrated the database before this opens it. */
  static open(file: string, writes: DelegatedWrites, durableMark: SharedArrayBuffer): DelegatingSqliteStore {
    let reader: Connection | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      // As on the writer's connections: a lock is retried on a timer, never waited for on the event loop.
      reader.exec('PRAGMA busy_timeout = 0');
      return new DelegatingSqliteStore(reader, writes, new DurableMarkReader(durableMark));
    } catch (error) {
      reader?.close();
      throw translateSqliteError(error);
    }
  }

  observe(observer: StorageObserver): void {
    this.#runner.observer = observer;
  }

  async close(): Promise<void> {
    if (this.#runner.closed) return;
    this.#runner.closed = true;
    if (this.#reader.isOpen) this.#reader.close();
  }
}
