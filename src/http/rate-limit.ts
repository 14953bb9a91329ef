import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { RateLimitConfig } from '../config.js';

/**
 * Where each key's bucket is kept, as one number: the time, on the store's clock, at which it is full again (a key
 * never seen, or a time already past, is a full bucket). One number, so that buckets shared by the worker threads
 * of an instance (src/workers/) change in one atomic step; by default, a map in this thread.
 */
export interface BucketCells {
  /**
   * Sets the key's time to `next(time)` in one step (when another thread changed it meanwhile, `next` runs again on
   * the new time), then calls `done` with the time `next` was applied to.
   */
  update(key: string, next: (fullAt: number) => number, done: (error: Error | null, fullAt: number) => void): void;
  /** Forgets every key whose bucket is full at `now`: a full bucket is the same as none. */
  sweep(now: number): void;
}

/** Buckets in this thread only. */
export class LocalBucketCells implements BucketCells {
  readonly #fullAt = new Map<string, number>();

  update(key: string, next: (fullAt: number) => number, done: (error: Error | null, fullAt: number) => void): void {
    const fullAt = this.#fullAt.get(key) ?? 0;
    this.#fullAt.set(key, next(fullAt));
    done(null, fullAt);
  }

  sweep(now: number): void {
    for (const [key, fullAt] of this.#fullAt) if (fullAt <= now) this.#fullAt.delete(key);
  }
}

/** Idle full buckets are swept at most this often, so a tiny refill time does not make every request a sweep. */
const MIN_SWEEP_INTERVAL_MS = 1000;

/**
 * A token bucket per key, as a store for @fastify/rate-limit: `burst` tokens, refilled at `max` per `windowMs`.
 * The plugin's own store counts requests in fixed windows, so its burst is `max` and a client can send twice that
 * across a window boundary; a bucket lets the burst and the sustained rate be chosen apart, and holds both.
 *
 * The plugin (registered with `max: burst`) refuses when `current > max` and turns `ttl` into Retry-After and
 * X-RateLimit-Reset: an allowed request answers `current` = burst minus the whole tokens left and `ttl` = time
 * until the bucket is full again; a refused one answers burst + 1 and the time until the next token.
 *
 * Tokens are counted in units of 1/windowMs token, so that refilling is `max` units per millisecond. A bucket is kept
 * as the time it is full again (BucketCells), and buckets that have refilled are dropped: memory holds only keys seen
 * within about one full refill time.
 */
export class TokenBucketStore implements FastifyRateLimitStore {
  readonly #burst: number;
  readonly #perMs: number;
  readonly #cost: number;
  readonly #capacity: number;
  readonly #sweepIntervalMs: number;
  readonly #now: () => number;
  readonly #cells: BucketCells;
  #lastSweep: number;

  constructor(config: RateLimitConfig, now: () => number = () => performance.now(), cells: BucketCells = new LocalBucketCells()) {
    this.#burst = config.burst;
    this.#perMs = config.max;
    this.#cost = config.windowMs;
    this.#capacity = config.burst * config.windowMs;
    this.#sweepIntervalMs = Math.max(MIN_SWEEP_INTERVAL_MS, this.#capacity / this.#perMs);
    this.#now = now;
    this.#cells = cells;
    this.#lastSweep = now();
  }

  incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void): void {
    const now = this.#now();
    if (now - this.#lastSweep >= this.#sweepIntervalMs) {
      this.#lastSweep = now;
      this.#cells.sweep(now);
    }
    this.#cells.update(
      key,
      (fullAt) => {
        const units = this.#unitsAt(fullAt, now);
        // Taking a token moves the time it is full again; a refusal leaves it.
        return units >= this.#cost ? now + (this.#capacity - (units - this.#cost)) / this.#perMs : fullAt;
      },
      (error, fullAt) => {
        if (error) return callback(error);
        const units = this.#unitsAt(fullAt, now);
        if (units >= this.#cost) {
          const left = units - this.#cost;
          callback(null, { current: this.#burst - Math.floor(left / this.#cost), ttl: Math.ceil((this.#capacity - left) / this.#perMs) });
        } else {
          callback(null, { current: this.#burst + 1, ttl: Math.ceil((this.#cost - units) / this.#perMs) });
        }
      },
    );
  }

  /** One bucket per key whatever the route: the limit is per token, not per token and route. */
  child(): FastifyRateLimitStore {
    return this;
  }

  /** Units in a bucket that is full again at `fullAt`. */
  #unitsAt(fullAt: number, now: number): number {
    return fullAt <= now ? this.#capacity : this.#capacity - (fullAt - now) * this.#perMs;
  }
}

/** The store class @fastify/rate-limit instantiates (it passes its own options, which the bucket does not need). */
export function tokenBucketStore(config: RateLimitConfig, now?: () => number, cells?: BucketCells): FastifyRateLimitStoreCtor {
  return class extends TokenBucketStore {
    constructor() {
      super(config, now, cells);
    }
  };
}
