import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { StorageUnavailableError } from '../errors.js';
import type { StorageIncident } from '../store.js';
import { SyncPlacement } from './sync-placement.js';

/**
 * Syncs one open file's data to disk off the event loop. fs.fdatasync on libuv's thread pool, looked up at each call
 * (not bound once) so that a test process may hold syncs back by replacing it (test/helpers/hold-wal-sync.ts), as it
 * does fs.fdatasyncSync, which a sync placed on the loop calls (./sync-placement.ts).
 */
export type SyncFile = (fd: number) => Promise<void>;

const fdatasync: SyncFile = (fd) =>
  new Promise((resolve, reject) => fs.fdatasync(fd, (error) => (error ? reject(error) : resolve())));

/**
 * The cells of the durable mark (an Int32Array over a SharedArrayBuffer), which every thread of an instance reads: the
 * main thread writes them, a worker thread's reads wait on them (./durable-mark.ts).
 */
export const MARK = {
  /** Commits begun on the write connection: bumped before each one, so a reader that saw a commit sees its number. */
  BEGUN: 0,
  /** The highest commit number a returned sync covers. */
  DURABLE: 1,
  /** 1 once a sync failed (or the WAL left its path): the store refuses everything. */
  FAILED: 2,
} as const;
const MARK_CELLS = 3;

/** Whether commit number `seq` is covered by `durable` (wrap-safe: the counters are int32 and may wrap). */
export function isCovered(durable: number, seq: number): boolean {
  return ((durable - seq) | 0) >= 0;
}

/** The store's refusal once its WAL cannot be trusted to hold what was acknowledged. */
export function syncFailure(cause?: unknown): StorageUnavailableError {
  return new StorageUnavailableError('storage could not make its log durable; restart plantstore', cause === undefined ? undefined : { cause });
}

interface Waiter {
  readonly seq: number;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

export interface WalSyncOptions {
  /** Replaces fs.fdatasync in tests that hold a sync back to see what waits for it. */
  readonly sync?: SyncFile;
  /** Told of a failed sync and of the WAL leaving its path. */
  readonly report: (incident: StorageIncident) => void;
  /** Replaces where the syncs run (tests that must see a sync on the loop whatever the disk's speed). */
  readonly placement?: SyncPlacement;
}

/**
 * Makes the commits of the SQLite write connection durable without the event loop waiting for a slow disk: the group
 * commit of the SQLite store (docs/design/sqlite.md).
 *
 * The write connection commits with synchronous=NORMAL: its WAL frames are written into the OS page cache (which a
 * killed process cannot lose) but not synced. Each commit takes a number (`begin`, called before it), and this class
 * fdatasyncs the WAL, on libuv's thread pool or, while the loop is mostly idle and syncs are quick, on the loop
 * (./sync-placement.ts): a sync that began after commit N makes commits 1..N durable, since
 * fdatasync flushes every write made to the file before it began, through whichever descriptor. One sync runs at a
 * time, and the next starts as soon as it returns if commits were made meanwhile, so each sync covers every commit
 * made while the previous one ran. `durable(seq)` resolves once commit `seq` is covered; every answer waits for it.
 *
 * The descriptor is opened on the WAL's path once SQLite has created it, and the directory synced (the WAL's entry
 * may be new). After each sync the path is checked to still name that file (device and inode): while the store's
 * connections are open SQLite never recreates its WAL, so another file at the path (or none) means it was removed
 * under the server, SQLite writes on into an unlinked file, and nothing more can be acknowledged.
 *
 * A failed sync leaves what is on disk unknown (Linux may drop the dirty pages and report the error once, so a retry
 * that succeeds proves nothing), so the store fails for good: every waiter and every later call is refused with
 * StorageUnavailableError, readiness fails, and a restart recovers from what the disk really holds.
 */
export class WalSync {
  /** Shared with worker threads (./durable-mark.ts): begun, durable, failed. */
  readonly mark: SharedArrayBuffer;
  readonly #cells: Int32Array;
  readonly #walPath: string;
  readonly #fd: number;
  readonly #dev: number;
  readonly #ino: number;
  readonly #sync: SyncFile;
  /** Where each sync runs; undefined when a test's `sync` replaces the sync (it then always runs as given). */
  readonly #placement: SyncPlacement | undefined;
  readonly #report: (incident: StorageIncident) => void;
  /** The sync loop while it runs. */
  #running: Promise<void> | undefined;
  #waiters: Waiter[] = [];
  #failure: StorageUnavailableError | undefined;
  readonly #afterSync = new Set<(durable: number) => void>();
  #closed = false;
  #syncInFlight = false;
  /** The number of the latest commit that succeeded (`committed`); begun ones that threw changed nothing. */
  #succeeded = 0;

  /** Opens the WAL of the database at `file`; SQLite must have created it (any read in WAL mode does). */
  constructor(file: string, options: WalSyncOptions) {
    this.#walPath = `${file}-wal`;
    this.#sync = options.sync ?? fdatasync;
    this.#placement = options.sync ? undefined : (options.placement ?? new SyncPlacement());
    this.#report = options.report;
    this.mark = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * MARK_CELLS);
    this.#cells = new Int32Array(this.mark);
    // Read-only is enough for fdatasync, and never creates a file SQLite did not.
    this.#fd = fs.openSync(this.#walPath, 'r');
    try {
      const stat = fs.fstatSync(this.#fd);
      this.#dev = stat.dev;
      this.#ino = stat.ino;
      syncDirectory(path.dirname(this.#walPath));
    } catch (error) {
      fs.closeSync(this.#fd);
      throw error;
    }
  }

  /** Set once the store must refuse everything (a sync failed, or the WAL left its path). */
  get failure(): StorageUnavailableError | undefined {
    return this.#failure;
  }

  /** True while a sync is in flight (false while afterSync's listeners run): a commit made now waits for it and the next. */
  get syncing(): boolean {
    return this.#syncInFlight;
  }

  /** The number of the latest commit begun (what a read made now could have seen). */
  get begun(): number {
    return Atomics.load(this.#cells, MARK.BEGUN);
  }

  /** The highest commit number known durable. */
  get durableSeq(): number {
    return Atomics.load(this.#cells, MARK.DURABLE);
  }

  /**
   * Numbers a commit about to be made on the write connection (call it before the commit, so any reader that sees
   * the commit sees a number at least this). A commit that then fails only makes a sync cover nothing new.
   */
  begin(): number {
    return Atomics.add(this.#cells, MARK.BEGUN, 1) + 1;
  }

  /** Records that commit `seq` succeeded (its work returned): a failed sync that was to cover it fails the store. */
  committed(seq: number): void {
    if (isCovered(seq, this.#succeeded)) this.#succeeded = seq;
  }

  /**
   * Resolves once commit `seq` (by default every commit begun so far) is on disk; undefined when it already is, so a
   * read on a quiet store waits for nothing. Rejects once the store has failed.
   */
  durable(seq: number = this.begun): Promise<void> | undefined {
    if (this.#failure) return Promise.reject(this.#failure);
    if (isCovered(this.durableSeq, seq)) return undefined;
    const promise = new Promise<void>((resolve, reject) => this.#waiters.push({ seq, resolve, reject }));
    this.#running ??= this.#run();
    return promise;
  }

  /**
   * Calls `listener` each time a sync has returned (with the commit number now durable), before the next sync starts:
   * the moment to commit what waited (the write queue's pacing), and the one to publish what just became durable.
   * Also called once when the store fails, with nothing more durable. Returns the function that stops it.
   */
  afterSync(listener: (durable: number) => void): () => void {
    this.#afterSync.add(listener);
    return () => {
      this.#afterSync.delete(listener);
    };
  }

  /** Waits for the sync in flight, then closes the descriptor; commits after this are refused. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#running;
    fs.closeSync(this.#fd);
  }

  /** Syncs until every commit begun is durable, waking waiters as their commits are covered. */
  async #run(): Promise<void> {
    // Started by the first commit (or read) to wait: the commits made after it in the same synchronous stretch (the
    // write queue committing several batches at once) are covered by this first sync, not the next.
    await Promise.resolve();
    try {
      while (!isCovered(this.durableSeq, this.begun)) {
        const covered = this.begun;
        // Whether a commit that succeeded is not durable yet: only then can a failed sync lose something.
        const atStake = !isCovered(this.durableSeq, this.#succeeded);
        this.#syncInFlight = true;
        const onLoop = this.#placement?.onLoop() === true;
        const started = performance.now();
        try {
          if (onLoop) fs.fdatasyncSync(this.#fd);
          else await this.#sync(this.#fd);
        } catch (error) {
          if (atStake) throw error;
          // Every commit this sync was to cover failed (a disk full, a file system turned read-only): none is
          // visible or acknowledged, and every earlier one was synced already, so nothing is lost; the store goes on
          // refusing what fails by itself, and reads what is durable.
          this.#report({ level: 'warn', message: 'a sync of the SQLite WAL failed after commits that had failed too; nothing acknowledged depends on it', error: error as Error });
        } finally {
          this.#syncInFlight = false;
          this.#placement?.record(performance.now() - started, onLoop);
        }
        this.#assertWalAtPath();
        Atomics.store(this.#cells, MARK.DURABLE, covered);
        Atomics.notify(this.#cells, MARK.DURABLE);
        // Waiters arrive nearly in commit order, not exactly (a read asks after the commits it could see).
        const waiting: Waiter[] = [];
        for (const waiter of this.#waiters) {
          if (isCovered(covered, waiter.seq)) waiter.resolve();
          else waiting.push(waiter);
        }
        this.#waiters = waiting;
        // Commits made here (the write queue's held batch) are covered by the next round of this loop.
        for (const listener of this.#afterSync) listener(covered);
      }
    } catch (error) {
      this.#fail(error);
    } finally {
      this.#running = undefined;
    }
  }

  /** The WAL at the path must still be the file synced: otherwise what SQLite writes is unlinked, and lost at restart. */
  #assertWalAtPath(): void {
    let now: fs.Stats | undefined;
    try {
      now = fs.statSync(this.#walPath);
    } catch (error) {
      // As for the database file (file-identity.ts): only "not there" is a verdict; a stat that fails otherwise
      // (EIO, EACCES) says nothing of which file is at the path.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return;
    }
    if (now && now.dev === this.#dev && now.ino === this.#ino) return;
    throw new Error(`the SQLite WAL ${this.#walPath} was ${now ? 'replaced by another file' : 'removed'} while open`);
  }

  #fail(error: unknown): void {
    this.#failure = syncFailure(error);
    Atomics.store(this.#cells, MARK.FAILED, 1);
    Atomics.notify(this.#cells, MARK.DURABLE);
    for (const waiter of this.#waiters.splice(0)) waiter.reject(this.#failure);
    this.#report({
      level: 'error',
      message:
        'the SQLite WAL could not be made durable (a failed sync, or the WAL removed under the server): every request to storage is ' +
        'refused (503) and /readyz answers 503 until plantstore is restarted',
      error: error as Error,
    });
    // Batches held for this sync are let go, to be refused.
    for (const listener of this.#afterSync) listener(this.durableSeq);
  }
}

/** fsyncs a directory, so that a file entry just created in it survives a power loss. */
function syncDirectory(directory: string): void {
  const fd = fs.openSync(directory, 'r');
  try {
    fs.fsyncSync(fd);
  } catch (error) {
    // A file system that cannot sync a directory says EINVAL; SQLite ignores that too, there is nothing more to do.
    if ((error as NodeJS.ErrnoException).code !== 'EINVAL') throw error;
  } finally {
    fs.closeSync(fd);
  }
}
