import { performance } from 'node:perf_hooks';

/**
 * Above this share of its time busy, the event loop has other work to do while a sync runs: the WAL is then synced on
 * the thread pool (./sync-placement.ts), so the loop parses meanwhile. Below it the loop has time to
 * spare, and the hand-off to a pool thread would only add latency.
 */
export const BUSY_LOOP_SHARE = 0.7;

/** How often the loop's busy share is read again, in milliseconds. */
const WINDOW_MS = 100;

/** What is read of the process: tests give their own. */
export interface LoopClocks {
  /** Milliseconds, monotonic. */
  readonly now: () => number;
  /** Milliseconds the event loop has been busy (not waiting for events) since it started. */
  readonly loopActive: () => number;
}

const NODE_CLOCKS: LoopClocks = {
  now: () => performance.now(),
  loopActive: () => performance.eventLoopUtilization().active,
};

/**
 * The share of the last window (about WINDOW_MS) the event loop was busy, from Node's event loop utilization, read at
 * most once a window whenever it is asked: a few hundred nanoseconds per window, nothing per request. Time its owner
 * says should not count (`discount`: the loop's own syncs) is left out. Busy until a first
 * window has passed.
 */
export class LoopLoad {
  readonly #clocks: LoopClocks;
  #share = 1;
  #windowStart: number;
  #activeAtWindowStart: number;
  #discountedMs = 0;

  constructor(clocks: LoopClocks = NODE_CLOCKS) {
    this.#clocks = clocks;
    this.#windowStart = clocks.now();
    this.#activeAtWindowStart = clocks.loopActive();
  }

  /** The loop's busy share over the last window, 0 to 1. */
  #busyShare(): number {
    const now = this.#clocks.now();
    const elapsed = now - this.#windowStart;
    if (elapsed >= WINDOW_MS) {
      const active = this.#clocks.loopActive();
      this.#share = Math.min(1, Math.max(0, active - this.#activeAtWindowStart - this.#discountedMs) / elapsed);
      this.#windowStart = now;
      this.#activeAtWindowStart = active;
      this.#discountedMs = 0;
    }
    return this.#share;
  }

  /** Whether the loop is busier than BUSY_LOOP_SHARE. */
  busy(): boolean {
    return this.#busyShare() >= BUSY_LOOP_SHARE;
  }

  /** Leaves `ms` of the loop's busy time out of the current window. */
  discount(ms: number): void {
    this.#discountedMs += ms;
  }
}
