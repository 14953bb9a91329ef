import { LoopLoad } from './loop-load.js';

/** A sync that took longer than this (milliseconds, wherever it ran) sends the syncs after it to the thread pool. */
export const QUICK_SYNC_MS = 1;

/** Quick syncs in a row, at start and after a slow one, before a sync runs on the event loop. */
export const QUICK_SYNCS_BEFORE_LOOP = 64;

/**
 * Where the WAL's next sync runs: on the event loop (`fdatasyncSync`) or on libuv's thread pool (docs/design/sqlite.md,
 * "Where the sync runs"). On the pool the loop reads and parses requests while the disk works, but the sync starts only
 * once a pool thread gets a core, and its end reaches the loop one wake-up later: on a loop with little else to do, as
 * under a few clients that each wait for their answers, that hand-off is latency and nothing else. So a sync runs on
 * the loop while the loop is not busy (its own syncs on the loop left out: ./loop-load.ts) and syncs
 * are quick; on the pool when the loop is busy, and after any slow sync, so that a slow or stalling disk holds the loop
 * once at most, until QUICK_SYNCS_BEFORE_LOOP quick ones in a row show it quick again.
 */
export class SyncPlacement {
  readonly #load: LoopLoad;
  readonly #quickSyncMs: number;
  /** Quick syncs since the last slow one (or the start), counting up to QUICK_SYNCS_BEFORE_LOOP. */
  #quickInARow = 0;

  constructor(load: LoopLoad = new LoopLoad(), quickSyncMs = QUICK_SYNC_MS) {
    this.#load = load;
    this.#quickSyncMs = quickSyncMs;
  }

  /** Whether the next sync runs on the event loop. */
  onLoop(): boolean {
    return this.#quickInARow >= QUICK_SYNCS_BEFORE_LOOP && !this.#load.busy();
  }

  /** A sync took `ms`, on the loop or on the pool. */
  record(ms: number, onLoop: boolean): void {
    if (onLoop) this.#load.discount(ms);
    if (ms > this.#quickSyncMs) this.#quickInARow = 0;
    else if (this.#quickInARow < QUICK_SYNCS_BEFORE_LOOP) this.#quickInARow += 1;
  }
}
