import { StorageUnavailableError } from '../errors.js';
import type { StorageObserver } from '../observer.js';
import type { Store, StorageIncident } from '../store.js';
import { Incidents } from '../incidents.js';
import { CHECKPOINTER_DEFAULTS, Checkpointer, type CheckpointerOptions } from './checkpointer.js';
import { DatabaseFileIdentity } from './file-identity.js';
import { openConnection, translateSqliteError, type Connection } from './connection.js';
import { LockRetry } from './lock-retry.js';
import { migrate } from './migrations.js';
import { SqliteChanges } from './changes.js';
import { SqlitePlants } from './plants.js';
import { prepareDatabaseFiles } from './private-files.js';
import { SqliteTokens } from './tokens.js';
import { SqliteWebhookOutbox } from './webhook-outbox.js';
import { SqliteWebhookSubscriptions } from './webhook-subscriptions.js';
import { SqliteHeartbeat } from './heartbeat.js';

/**
 * Deliberately small. Every page split (random ids split leaves all the time) leaves a temporary page number
 * past the end of the database in SQLite's page cache, and the next commit then scans the cache's whole hash
 * table to drop it: a cost per commit that grows with the cache, more than the extra page reads a smaller cache
 * causes (they come from the OS page cache). The sizes measured are in docs/benchmarks/notes.md ("Random ids at 5 million rows").
 */
const WRITER_CACHE_MIB = 16;
const READER_CACHE_MIB = 16;

/** A readiness check should answer promptly, so its heartbeat waits for another connection's lock only this long. */
const HEARTBEAT_LOCK_WAIT_MS = 1000;


/**
 * SQLite in WAL mode with synchronous=FULL. Every write runs on the event loop, on one connection: a batch of
 * creates is one transaction and one fsync, and the loop waits for that fsync. That wait is cheaper than any
 * hand-off: requests arriving meanwhile queue in the kernel and make the next batch bigger, while a writer thread
 * sharing the core, or an fdatasync on the thread pool with the loop going on, made batches smaller and each create
 * dearer (measured in docs/benchmarks/notes.md, "Where the time goes"). A lock held by another process must not block the loop, so the write connection never waits
 * for a lock itself (busy timeout 0): a write that finds the lock taken is retried on a timer, up to the busy
 * timeout. Reads use a second connection, which WAL does not make wait for a writer; in the rare cases where a read
 * meets a lock (another connection rebuilding the WAL index after a process crashed mid-write) it is retried the same
 * way. Checkpoints run on a thread of their own (checkpointer-thread.ts), never inside a commit.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  /** One writer: SQLite commits one transaction at a time. */
  readonly writeConcurrency = 1;
  /** Plants, tokens, webhook subscriptions and their outbox, each on this store's two connections and its lock retries. */
  readonly plants: SqlitePlants;
  readonly tokens: SqliteTokens;
  readonly webhookSubscriptions: SqliteWebhookSubscriptions;
  readonly webhookOutbox: SqliteWebhookOutbox;
  readonly changes: SqliteChanges;
  readonly #reader: Connection;
  readonly #writer: Connection;
  readonly #heartbeat: SqliteHeartbeat;
  readonly #checkpointer: Checkpointer;
  readonly #identity: DatabaseFileIdentity;
  readonly #incidents: Incidents;
  readonly #locks = new LockRetry();

  private constructor(reader: Connection, writer: Connection, checkpointer: Checkpointer, incidents: Incidents, identity: DatabaseFileIdentity) {
    this.#identity = identity;
    this.#reader = reader;
    const runners = { read: <T>(work: () => T) => this.#unlocked(work), write: <T>(work: () => T) => this.#write(work) };
    this.webhookSubscriptions = new SqliteWebhookSubscriptions(reader, writer, runners);
    this.webhookOutbox = new SqliteWebhookOutbox(reader, writer, runners);
    this.changes = new SqliteChanges(reader, writer, runners);
    this.plants = new SqlitePlants(reader, writer, this.webhookOutbox, this.changes, runners);
    this.tokens = new SqliteTokens(reader, writer, runners);
    this.#writer = writer;
    this.#heartbeat = new SqliteHeartbeat(writer);
    this.#checkpointer = checkpointer;
    this.#incidents = incidents;
  }

  /** `options.checkpointer` exists for tests, which cannot wait the real restart delays out. */
  static open(file: string, options: { readonly checkpointer?: Partial<CheckpointerOptions> } = {}): SqliteStore {
    prepareDatabaseFiles(file);
    let reader: Connection | undefined;
    let writer: Connection | undefined;
    let checkpointer: Checkpointer | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      migrate(reader);
      writer = openConnection(file, WRITER_CACHE_MIB);
      // Opening and migrating may wait for another process (one migrating too); serving, no statement waits for a
      // lock on the event loop: #unlocked retries on a timer instead.
      for (const connection of [reader, writer]) connection.exec('PRAGMA busy_timeout = 0');
      // Checkpoints run on their own thread, never inside a commit.
      writer.exec('PRAGMA wal_autocheckpoint = 0');
      const incidents = new Incidents();
      checkpointer = new Checkpointer(file, { ...CHECKPOINTER_DEFAULTS, ...options.checkpointer }, (incident) => incidents.report(incident));
      const identity = new DatabaseFileIdentity(file, (incident) => incidents.report(incident));
      return new SqliteStore(reader, writer, checkpointer, incidents, identity);
    } catch (error) {
      void checkpointer?.stop();
      writer?.close();
      reader?.close();
      throw translateSqliteError(error);
    }
  }

  /** Runs `work` (one read, or one write that is a single durable commit), retried while another connection holds a lock (LockRetry). */
  #unlocked<T>(work: () => T, lockWaitMs?: number): Promise<T> {
    return this.#locks.run(work, lockWaitMs);
  }

  /**
   * A write (one durable commit) under #unlocked, made only while the database file at the path is the one open, and
   * acknowledged only if it still is once committed: a commit into a removed or replaced file would be lost.
   */
  #write<T>(work: () => T, lockWaitMs?: number): Promise<T> {
    return this.#unlocked(() => {
      this.#identity.assertSame();
      const result = work();
      this.#identity.assertSame();
      return result;
    }, lockWaitMs);
  }

  observe(observer: StorageObserver): void {
    this.#locks.observer = observer;
  }

  /** Also refuses while the WAL cannot be checkpointed: writes would still succeed, but the WAL would grow without bound. */
  checkWritable(): Promise<void> {
    const problem = this.#checkpointer.problem;
    if (problem) return Promise.reject(new StorageUnavailableError(undefined, { cause: problem }));
    return this.#write(() => this.#heartbeat.write(Date.now()), HEARTBEAT_LOCK_WAIT_MS);
  }

  onIncident(listener: (incident: StorageIncident) => void): () => void {
    return this.#incidents.listen(listener);
  }

  /** The thread checkpointing the WAL; for tests, which make it crash or fail. */
  get checkpointer(): Checkpointer {
    return this.#checkpointer;
  }

  async close(): Promise<void> {
    if (this.#locks.closed) return;
    this.#locks.closed = true;
    this.#identity.stop();
    await this.#checkpointer.stop();
    if (this.#writer.isOpen) this.#writer.close();
    if (this.#reader.isOpen) this.#reader.close();
  }
}
