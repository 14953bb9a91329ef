import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { RateLimitConfig } from '../config.js';

interface Bucket {
  /** Tokens held, in units of 1/windowMs token, so that refilling is `max` units per millisecond. */
  units: number;
  /** performance.now() when `units` was computed. */
  at: number;
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
 * A full bucket is the same as no bucket, so buckets that have refilled are dropped: memory holds only keys seen
 * within about one full refill time.
 */
export class TokenBucketStore implements FastifyRateLimitStore {
  readonly #burst: number;
  readonly #perMs: number;
  readonly #cost: number;
  readonly #capacity: number;
  readonly #sweepIntervalMs: number;
  readonly #now: () => number;
  readonly #buckets = new Map<string, Bucket>();
  #lastSweep: number;

  constructor(config: RateLimitConfig, now: () => number = () => performance.now()) {
    this.#burst = config.burst;
    this.#perMs = config.max;
    this.#cost = config.windowMs;
    this.#capacity = config.burst * config.windowMs;
    this.#sweepIntervalMs = Math.max(MIN_SWEEP_INTERVAL_MS, this.#capacity / this.#perMs);
    this.#now = now;
    this.#lastSweep = now();
  }

  incr(key: string, callback: (error: Error | null, result?: { current: number; ttl: number }) => void): void {
    const now = this.#now();
    this.#sweep(now);
    const bucket = this.#buckets.get(key) ?? { units: this.#capacity, at: now };
    bucket.units = this.#unitsAt(bucket, now);
    bucket.at = now;
    this.#buckets.set(key, bucket);
    if (bucket.units >= this.#cost) {
      bucket.units -= this.#cost;
      const current = this.#burst - Math.floor(bucket.units / this.#cost);
      callback(null, { current, ttl: Math.ceil((this.#capacity - bucket.units) / this.#perMs) });
    } else {
      callback(null, { current: this.#burst + 1, ttl: Math.ceil((this.#cost - bucket.units) / this.#perMs) });
    }
  }

  /** One bucket per key whatever the route: the limit is per token, not per token and route. */
  child(): FastifyRateLimitStore {
    return this;
  }

  #unitsAt(bucket: Bucket, now: number): number {
    return Math.min(this.#capacity, bucket.units + (now - bucket.at) * this.#perMs);
  }

  #sweep(now: number): void {
    if (now - this.#lastSweep < this.#sweepIntervalMs) return;
    this.#lastSweep = now;
    for (const [key, bucket] of this.#buckets) {
      if (this.#unitsAt(bucket, now) >= this.#capacity) this.#buckets.delete(key);
    }
  }
}

/** The store class @fastify/rate-limit instantiates (it passes its own options, which the bucket does not need). */
export function tokenBucketStore(config: RateLimitConfig, now?: () => number): FastifyRateLimitStoreCtor {
  return class extends TokenBucketStore {
    constructor() {
      super(config, now);
    }
  };
}
