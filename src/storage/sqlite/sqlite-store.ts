import { StorageUnavailableError } from '../errors.js';
import type { StorageObserver } from '../observer.js';
import type { Store, StorageIncident } from '../store.js';
import { Incidents } from '../incidents.js';
import { CHECKPOINTER_DEFAULTS, Checkpointer, type CheckpointerOptions } from './checkpointer.js';
import { DatabaseFileIdentity } from './file-identity.js';
import { openConnection, translateSqliteError, type Connection } from './connection.js';
import { StatementRunner } from './statement-runner.js';
import { migrate } from './migrations.js';
import { SqliteChanges } from './changes.js';
import { SqlitePlants } from './plants.js';
import { prepareDatabaseFiles } from './private-files.js';
import { SqliteTokens } from './tokens.js';
import { SqliteWebhookOutbox } from './webhook-outbox.js';
import { SqliteWebhookSubscriptions } from './webhook-subscriptions.js';
import { SqliteHeartbeat } from './heartbeat.js';
import { WalSync, type SyncFile } from './wal-sync.js';
import type { SyncPlacement } from './sync-placement.js';

/**
 * Deliberately small. Every page split (random ids split leaves all the time) leaves a temporary page number
 * past the end of the database in SQLite's page cache, and the next commit then scans the cache's whole hash
 * table to drop it: a cost per commit that grows with the cache, more than the extra page reads a smaller cache
 * causes (they come from the OS page cache). The sizes measured are in docs/benchmarks.md ("Figures other pages rest on").
 */
const WRITER_CACHE_MIB = 16;
const READER_CACHE_MIB = 16;

/** A readiness check should answer promptly, so its heartbeat waits for another connection's lock only this long. */
const HEARTBEAT_LOCK_WAIT_MS = 1000;


/**
 * SQLite in WAL mode. Every write runs on the event loop, on one connection: a batch of creates is one transaction.
 * The commit itself does not sync (synchronous=NORMAL on the write connection); WalSync fdatasyncs the WAL on libuv's
 * thread pool, one sync at a time, and every answer waits for a sync that began after the commit it depends on, while
 * the loop parses the next batch, which commits when that sync returns (`commitPacing`, the write queue's). Every read
 * waits too, for the sync covering every commit it could have seen: nothing is shown before it is durable
 * (docs/design/sqlite.md). A lock held by another process must not block the loop, so
 * the write connection never waits for a lock itself (busy timeout 0): a write that finds the lock taken is retried
 * on a timer, up to the busy timeout. Reads use a second connection, which WAL does not make wait for a writer; in the
 * rare cases where a read meets a lock (another connection rebuilding the WAL index after a process crashed
 * mid-write) it is retried the same way. Checkpoints run on a thread of their own (checkpointer-thread.ts), never
 * inside a commit, with synchronous=FULL.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  /**
   * Batches committed and waiting for their sync. The write queue commits only when the sync in flight returns
   * (`commitPacing`), so this is one batch being answered plus what commits then: one batch, or up to three when more
   * than WRITE_BATCH_LIMIT rows waited (a bulk stream), all covered by the next sync.
   */
  readonly writeConcurrency = 4;
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
  readonly #runner = new StatementRunner();
  readonly #wal: WalSync;

  private constructor(
    reader: Connection,
    writer: Connection,
    checkpointer: Checkpointer,
    incidents: Incidents,
    identity: DatabaseFileIdentity,
    wal: WalSync,
  ) {
    this.#identity = identity;
    this.#wal = wal;
    this.#reader = reader;
    const runners = { read: <T>(work: () => T) => this.#read(work), write: <T>(work: () => T) => this.#write(work) };
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

  /**
   * `options` exist for tests: `checkpointer` shortens the real restart delays, `sync` replaces fs.fdatasync (to hold
   * a sync back and see what waits for it), `placement` decides where each sync runs (./sync-placement.ts).
   */
  static open(file: string, options: { readonly checkpointer?: Partial<CheckpointerOptions>; readonly sync?: SyncFile; readonly placement?: SyncPlacement } = {}): SqliteStore {
    prepareDatabaseFiles(file);
    let reader: Connection | undefined;
    let writer: Connection | undefined;
    let checkpointer: Checkpointer | undefined;
    let wal: WalSync | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      migrate(reader);
      writer = openConnection(file, WRITER_CACHE_MIB);
      // Opening and migrating may wait for another process (one migrating too); serving, no statement waits for a
      // lock on the event loop: #runRetryingLocks retries on a timer instead.
      for (const connection of [reader, writer]) connection.exec('PRAGMA busy_timeout = 0');
      // Checkpoints run on their own thread, never inside a commit.
      writer.exec('PRAGMA wal_autocheckpoint = 0');
      // Commits write the WAL without syncing it; WalSync syncs it, off the loop, before anything is answered. Every
      // other connection (the reader, the checkpointer, worker threads' readers, CLI commands) keeps synchronous=FULL
      // from openConnection, so a checkpoint syncs the WAL before copying it and the database file before the WAL can
      // be reused.
      writer.exec('PRAGMA synchronous = NORMAL');
      const incidents = new Incidents();
      // The connections hold the WAL open (SQLite created it on the first read), so while they are open this
      // descriptor reaches the file every commit writes; WalSync checks that after each sync.
      wal = new WalSync(file, {
        report: (incident) => incidents.report(incident),
        ...(options.sync ? { sync: options.sync } : {}),
        ...(options.placement ? { placement: options.placement } : {}),
      });
      checkpointer = new Checkpointer(file, { ...CHECKPOINTER_DEFAULTS, ...options.checkpointer }, (incident) => incidents.report(incident));
      const identity = new DatabaseFileIdentity(file, (incident) => incidents.report(incident));
      // Registered before any other listener (the write queue's), and run before the waiters the sync resolved go on.
      wal.afterSync(() => identity.lookNow());
      return new SqliteStore(reader, writer, checkpointer, incidents, identity, wal);
    } catch (error) {
      void wal?.close();
      void checkpointer?.stop();
      writer?.close();
      reader?.close();
      throw translateSqliteError(error);
    }
  }

  /**
   * Runs `work` (one read, or one write that is a single commit), retried while another connection holds a lock
   * (StatementRunner); refused once a sync failed.
   */
  #runRetryingLocks<T>(work: () => T, lockWaitMs?: number): Promise<T> {
    const failure = this.#wal.failure;
    if (failure) {
      this.#runner.observer.storageFailed('io');
      return Promise.reject(failure);
    }
    return this.#runner.run(work, lockWaitMs);
  }

  /** A read, answered once every commit it could have seen is durable. */
  async #read<T>(work: () => T): Promise<T> {
    const result = await this.#runRetryingLocks(work);
    await this.#wal.durable();
    return result;
  }

  /**
   * A write (one commit) under #runRetryingLocks, made only while the database file at the path is not known to be
   * gone, and acknowledged only once a WAL sync that began after it has returned and the path was found, after that
   * sync, to still name the file open (a commit into a removed or replaced file would be lost; DatabaseFileIdentity
   * looks once per sync). A write that changed nothing waits too: what it found (a row another batch just
   * committed, or just deleted) may not be durable yet.
   */
  async #write<T>(work: () => T, lockWaitMs?: number): Promise<T> {
    let synced: Promise<void> | undefined;
    const result = await this.#runRetryingLocks(() => {
      this.#identity.assertSame();
      const seq = this.#wal.begin();
      let done: T;
      try {
        done = work();
        this.#wal.committed(seq);
      } finally {
        // A write that threw has its number synced too (a sync covering nothing new), or a worker thread's read
        // waiting on the mark would wait for the next commit. Awaited below only if this attempt succeeded.
        synced = this.#wal.durable(seq);
        synced?.catch(() => undefined);
      }
      return done;
    }, lockWaitMs);
    await synced;
    this.#identity.assertSame();
    return result;
  }

  /**
   * The write queue's pacing: while a sync is in flight, the next batch waits in the queue and commits when it
   * returns, so each sync covers one batch gathered meanwhile rather than many small ones (docs/design/sqlite.md).
   */
  get commitPacing(): WalSync {
    return this.#wal;
  }

  /**
   * Durability as this store's other users see it: `afterSync(listener)` is told the highest commit number durable
   * after each sync, `durable()` waits for every commit begun so far. A write's promise resolves only once durable.
   */
  get durability(): Pick<WalSync, 'afterSync' | 'durable' | 'durableSeq' | 'begun'> {
    return this.#wal;
  }

  /** The durable mark in shared memory, for worker threads' reads (./durable-mark.ts). */
  get durableMark(): SharedArrayBuffer {
    return this.#wal.mark;
  }

  observe(observer: StorageObserver): void {
    this.#runner.observer = observer;
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
    if (this.#runner.closed) return;
    this.#runner.closed = true;
    this.#identity.stop();
    await this.#wal.close();
    await this.#checkpointer.stop();
    if (this.#writer.isOpen) this.#writer.close();
    if (this.#reader.isOpen) this.#reader.close();
  }
}
