import type { CommitPacing } from '../storage/store.js';

/** Syncs that pass without a post-sync hold after one ended with the clients answered not back (SyncHold.afterSync). */
const HOLD_BACKOFF_SYNCS = 16;

/** A post-sync hold lasts this many times WRITE_SYNC_HOLD_MS at most, however steadily creates arrive meanwhile. */
const HOLD_LIMIT = 10;

/** What the hold reads of its write queue, and how it asks the queue to flush. */
export interface SyncHoldQueue {
  /** Rows waiting in the queue, own creates and handed-over batches alike. */
  queuedRows(): number;
  /** Rows of the batches committed and not yet answered. */
  inFlightRows(): number;
  /** Flushes the queue in the loop's check phase (setImmediate). */
  schedule(): void;
}

export interface SyncHoldOptions {
  readonly batchLimit: number;
  readonly pacing?: CommitPacing;
  readonly postSyncHoldMs?: number;
}

/**
 * The hold after a sync, on a store that syncs apart from its commits (pacing): the next commit waits, briefly, for
 * the clients a sync's answers release to send again.
 */
export class SyncHold {
  readonly #options: SyncHoldOptions;
  readonly #queue: SyncHoldQueue;
  /** After a sync returned (pacing): commit once this many rows wait, or when #postSyncTimer fires. */
  #postSyncTarget = 0;
  #postSyncTimer: NodeJS.Timeout | undefined;
  /** The post-sync hold's time is up: the commit is made at the next flush, whatever waits. */
  #postSyncExpired = false;
  /** Syncs still to pass without a hold, after a hold ended with the clients not back (afterSync). */
  #holdBackoff = 0;

  constructor(options: SyncHoldOptions, queue: SyncHoldQueue) {
    this.#options = options;
    this.#queue = queue;
  }

  /**
   * A sync just returned (pacing): the batches it covered are about to be answered, and their clients, most of them,
   * send again within a round trip. Committing what waits at once would leave those for the next sync and split the
   * clients into two halves, each answered every other sync: twice the commits and syncs, each of which costs the
   * core about as much whatever its size (docs/benchmarks.md, "Figures other pages rest on"). So the
   * commit waits until most of as many rows wait as are being answered (three quarters, not to wait for stragglers;
   * with those already waiting, up to the batch limit), or until postSyncHoldMs passes with none arriving. A hold
   * that ends by its time (the clients answered did not send again: not a closed loop) stops holding for the next
   * HOLD_BACKOFF_SYNCS syncs, so
   * that such traffic pays the wait once in that many syncs at most. Either way the commit is made in the loop's check
   * phase (setImmediate), not here: the sync's return is one of the events of a poll phase, and requests read later in
   * that same phase would otherwise miss the commit, and the sync, by a few microseconds.
   */
  afterSync(): void {
    const { pacing, postSyncHoldMs = 0 } = this.#options;
    const queuedRows = this.#queue.queuedRows();
    const inFlightRows = this.#queue.inFlightRows();
    if (queuedRows === 0 && inFlightRows === 0) return;
    if (this.#holdBackoff > 0) this.#holdBackoff -= 1;
    if (pacing === undefined || postSyncHoldMs === 0 || this.#holdBackoff > 0 || inFlightRows === 0) {
      if (queuedRows > 0) this.#queue.schedule();
      return;
    }
    this.#postSyncTarget = Math.min(this.#options.batchLimit, queuedRows + Math.ceil((inFlightRows * 3) / 4));
    clearTimeout(this.#postSyncTimer);
    this.#postSyncExpired = false;
    this.#armPostSyncTimer(postSyncHoldMs);
    if (queuedRows > 0) this.#queue.schedule();
  }

  /**
   * The hold ends once postSyncHoldMs passes with no create arriving, not postSyncHoldMs after the sync: the loop
   * parses the clients' requests one by one (tens of microseconds each, so 25 of them take about a millisecond of the
   * core), and while they are still coming in the clients are back. HOLD_LIMIT times postSyncHoldMs bounds it all.
   */
  #armPostSyncTimer(holdMs: number, round = 1): void {
    const seen = this.#queue.queuedRows();
    this.#postSyncTimer = setTimeout(() => {
      this.#postSyncTimer = undefined;
      if (this.#queue.queuedRows() > seen && round < HOLD_LIMIT) {
        this.#armPostSyncTimer(holdMs, round + 1);
        return;
      }
      // Decided in the queue's flush, after the loop's next poll: timers run before it, and on a busy core the
      // clients' requests may be waiting unread when the hold's time is up.
      this.#postSyncExpired = true;
      this.#queue.schedule();
    }, holdMs);
  }

  /** True while the commit waits for the clients a sync's answers release (afterSync); ends the wait once they came. */
  held(): boolean {
    if (this.#postSyncTarget === 0) return false;
    if (this.#queue.queuedRows() < this.#postSyncTarget) {
      if (!this.#postSyncExpired) return true;
      this.#holdBackoff = HOLD_BACKOFF_SYNCS;
    }
    this.#postSyncTarget = 0;
    clearTimeout(this.#postSyncTimer);
    this.#postSyncTimer = undefined;
    return false;
  }
}
