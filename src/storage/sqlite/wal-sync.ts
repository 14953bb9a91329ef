import fs from 'node:fs';
import { promisify } from 'node:util';
import { StorageUnavailableError } from '../errors.js';

const fdatasync = promisify(fs.fdatasync);

/** Syncs one open file to disk; fs.fdatasync on the libuv thread pool unless a test supplies its own. */
export type SyncFile = (fd: number) => Promise<void>;

interface Waiter {
  readonly seq: number;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Makes commits on the SQLite write connection durable without the event loop waiting for the disk.
 *
 * The write connection commits with synchronous=NORMAL: its WAL frames are written (into the OS page cache, which a
 * killed process cannot lose) but not synced. Every commit takes a sequence number from `committed()`; this class
 * then fdatasyncs the WAL file on the thread pool, and a sync that started after commit N makes commit N and every
 * earlier one durable (fdatasync covers every write to the file made before it began, whichever descriptor made it).
 * Syncs run one at a time, back to back while commits are waiting, so one sync covers every commit made while the
 * previous one ran: group commit at the disk, while the loop goes on parsing and committing.
 *
 * Nothing read from storage may be answered before it is durable, so every answer (a create, a replay or conflict
 * decided from another batch's row, a delete, a read) first waits for `durable(seq)` with the latest sequence number
 * it could have seen. docs/design.md ("Durable without waiting") has the argument, checkpoints and WAL restarts
 * included.
 *
 * A failed sync leaves the state on disk unknown (Linux may drop the dirty pages and report the error only once), so
 * no retry is trusted: the store is failed for good, every waiter and every later call is refused, and a restart
 * recovers from what the disk really holds.
 */
export class WalSync {
  readonly #fd: number;
  readonly #sync: SyncFile;
  readonly #onFailure: (error: unknown) => void;
  #committed = 0;
  #durable = 0;
  /** The sync loop while it runs. */
  #running: Promise<void> | undefined;
  #waiters: Waiter[] = [];
  #failure: StorageUnavailableError | undefined;

  constructor(fd: number, sync: SyncFile = fdatasync, onFailure: (error: unknown) => void = () => undefined) {
    this.#fd = fd;
    this.#sync = sync;
    this.#onFailure = onFailure;
  }

  /** Set once a sync has failed: the store must refuse everything from then on. */
  get failure(): StorageUnavailableError | undefined {
    return this.#failure;
  }

  /** Records a commit just made on the write connection; its sequence number is what `durable` waits for. */
  committed(): number {
    this.#committed += 1;
    return this.#committed;
  }

  /**
   * Resolves once commit `seq` (by default every commit made so far) is on disk. Resolves at once when it already
   * is: a read on a quiet store waits for nothing.
   */
  durable(seq: number = this.#committed): Promise<void> | undefined {
    if (this.#failure) return Promise.reject(this.#failure);
    if (seq <= this.#durable) return undefined;
    const promise = new Promise<void>((resolve, reject) => this.#waiters.push({ seq, resolve, reject }));
    this.#running ??= this.#run();
    return promise;
  }

  /** Resolves once no sync is running, so the descriptor can be closed. */
  async settled(): Promise<void> {
    await this.#running;
  }

  /** Syncs until every commit made so far is durable, waking waiters as their commits are covered. */
  async #run(): Promise<void> {
    try {
      while (this.#durable < this.#committed) {
        const covered = this.#committed;
        await this.#sync(this.#fd);
        this.#durable = covered;
        let woken = 0;
        while (woken < this.#waiters.length && (this.#waiters[woken] as Waiter).seq <= covered) {
          (this.#waiters[woken] as Waiter).resolve();
          woken += 1;
        }
        if (woken > 0) this.#waiters.splice(0, woken);
      }
    } catch (error) {
      this.#failure = new StorageUnavailableError('storage could not sync its log to disk; restart plantstore', { cause: error });
      for (const waiter of this.#waiters.splice(0)) waiter.reject(this.#failure);
      this.#onFailure(error);
    } finally {
      this.#running = undefined;
    }
  }
}
