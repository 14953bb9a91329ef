import { randomInt } from 'node:crypto';
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { RateLimitConfig } from '../config/config.js';

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

/**
 * Buckets in a table of fixed size in this thread, found by a seeded hash of the key and holding no key: memory is
 * `slots` numbers whatever the number of keys. Keys whose hashes meet share a bucket, which can only make the limit
 * stricter for them; the seed is drawn per process, so which keys meet cannot be chosen from outside.
 */
export class FixedBucketCells implements BucketCells {
  readonly #fullAt: Float64Array;
  readonly #seed = randomInt(0x1_0000_0000);

  constructor(slots: number) {
    this.#fullAt = new Float64Array(slots);
  }

  update(key: string, next: (fullAt: number) => number, done: (error: Error | null, fullAt: number) => void): void {
    const slot = this.#slotOf(key);
    const fullAt = this.#fullAt[slot] as number;
    this.#fullAt[slot] = next(fullAt);
    done(null, fullAt);
  }

  /** A bucket that has refilled is a time in the past: nothing to let go of in a table of fixed size. */
  sweep(): void {}

  /** FNV-1a over the key's UTF-16 code units, from the seed. */
  #slotOf(key: string): number {
    let hash = this.#seed ^ 0x811c9dc5;
    for (let index = 0; index < key.length; index += 1) hash = Math.imul(hash ^ key.charCodeAt(index), 0x01000193);
    return (hash >>> 0) % this.#fullAt.length;
  }
}

/**
 * Client addresses whose failed authentications are counted apart: a table of this many buckets (128 KiB). More
 * addresses than that failing within a minute share buckets, each then throttled a little sooner.
 */
export const AUTH_FAILURE_SLOTS = 16_384;

/**
 * Failed authentications per client address (request.ip, so behind TRUST_PROXY the client's, not the proxy's): a
 * token bucket of `perMinute` failures, refilled at `perMinute` a minute. Only failures take from it, and only a
 * failure is refused for an empty one: a request whose token is valid is answered whatever its address's bucket
 * holds, so clients behind one proxy are never locked out by another's failures.
 */
export class AuthFailureThrottle {
  readonly #buckets: TokenBucketStore;
  readonly #burst: number;

  constructor(perMinute: number, now?: () => number, slots = AUTH_FAILURE_SLOTS) {
    this.#burst = perMinute;
    this.#buckets = new TokenBucketStore({ max: perMinute, windowMs: 60_000, burst: perMinute }, now, new FixedBucketCells(slots));
  }

  /** Counts a failure from `address`: undefined while within the limit, else the seconds until the next one may fail. */
  failed(address: string): number | undefined {
    let retryAfter: number | undefined;
    // The table's buckets answer at once: the callback has run when incr returns.
    this.#buckets.incr(address, (_error, result) => {
      if (result !== undefined && result.current > this.#burst) retryAfter = Math.max(1, Math.ceil(result.ttl / 1000));
    });
    return retryAfter;
  }
}
