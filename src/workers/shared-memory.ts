/**
 * What the worker threads of an instance keep in memory they all share (SharedArrayBuffers, changed with Atomics),
 * so that a per-instance limit is one limit, not one per worker, without a message per request: the write queue's
 * bound and its memory of the latest refusal, and the rate limit's token buckets. The main thread makes it; each
 * worker receives it in its workerData.
 */
import { createHash } from 'node:crypto';
import type { BucketCells } from '../http/rate-limit.js';
import type { SharedWriteState } from '../plants/write-bound.js';

/**
 * Token buckets the instance can hold: one per token name that has sent a request since the instance started.
 * Tokens are made by hand, so this is far more than any deployment has; past it, names whose hashes meet share a
 * bucket (never a refusal of a token that is within its limit by itself, only a stricter one).
 */
export const BUCKET_SLOTS = 65_536;

/** Plain data (SharedArrayBuffers and numbers), so it can be posted to a worker as it is. */
export interface InstanceMemory {
  /** Per thread slot (slot s at index s; the main thread is 0): writes its queue admitted that still wait (its `depth`). */
  readonly writeDepths: SharedArrayBuffer;
  /** Date.now() of the latest batch refused by storage, 0 for none since one committed whole. */
  readonly refusedAt: SharedArrayBuffer;
  /** Per bucket slot: the hash of its key (0: free), then the time its bucket is full again, as float64 bits. */
  readonly bucketKeys: SharedArrayBuffer;
  readonly bucketFullAt: SharedArrayBuffer;
  /** performance.timeOrigin + performance.now() when the instance started: the shared clock's zero. */
  readonly clockOrigin: number;
}

/** The main thread's slot; the worker threads have 1 to WORKERS − 1. */
export const MAIN_SLOT = 0;

/** For an instance of `threads` threads serving HTTP (WORKERS): the main thread and WORKERS − 1 workers. */
export function createInstanceMemory(threads: number): InstanceMemory {
  return {
    writeDepths: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * threads),
    refusedAt: new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT),
    bucketKeys: new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT * BUCKET_SLOTS),
    bucketFullAt: new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT * BUCKET_SLOTS),
    clockOrigin: performance.timeOrigin + performance.now(),
  };
}

/**
 * Milliseconds since the instance started, the same in every thread (each thread's performance.now() counts from
 * its own start): the clock of shared token buckets.
 */
export function sharedClock(memory: InstanceMemory): () => number {
  const offset = performance.timeOrigin - memory.clockOrigin;
  return () => offset + performance.now();
}

/**
 * The write queue's bound and refusal memory for the worker in `slot`, shared with every other worker. The bound is
 * checked against the sum of every worker's count: two workers admitting at the same moment can each see room for
 * one more, so the instance may hold up to WORKERS - 1 writes past WRITE_QUEUE_LIMIT, never more. Counts are per
 * worker rather than one total so that a worker that dies takes its count with it (forgetWorker).
 */
export class SharedWrites implements SharedWriteState {
  readonly #depths: Int32Array;
  readonly #index: number;
  readonly #refusedAt: BigInt64Array;
  readonly #limit: number;

  constructor(memory: InstanceMemory, slot: number, queueLimit: number) {
    this.#depths = new Int32Array(memory.writeDepths);
    this.#index = slot;
    this.#refusedAt = new BigInt64Array(memory.refusedAt);
    this.#limit = queueLimit;
  }

  admit(reserve = 0): boolean {
    if (this.depth() >= this.#limit - reserve) return false;
    Atomics.add(this.#depths, this.#index, 1);
    return true;
  }

  release(count: number): void {
    Atomics.sub(this.#depths, this.#index, count);
  }

  depth(): number {
    let total = 0;
    for (let index = 0; index < this.#depths.length; index += 1) total += Atomics.load(this.#depths, index);
    return total;
  }

  get refusedAt(): number | undefined {
    const at = Atomics.load(this.#refusedAt, 0);
    return at === 0n ? undefined : Number(at);
  }

  set refusedAt(at: number | undefined) {
    Atomics.store(this.#refusedAt, 0, BigInt(at ?? 0));
  }
}

/** A worker that died held writes that will never be released: its count goes with it, before a replacement starts. */
export function forgetWorker(memory: InstanceMemory, slot: number): void {
  Atomics.store(new Int32Array(memory.writeDepths), slot, 0);
}

/**
 * Asks whether a thread whose slot is not in `present` has writes admitted that it has not handed over yet: its
 * next batch is on its way to the writer (a delete waiting counts too; the writer's wait for it is bounded).
 */
export function writesComing(memory: InstanceMemory): (present: ReadonlySet<number>) => boolean {
  const depths = new Int32Array(memory.writeDepths);
  return (present) => {
    for (let index = 0; index < depths.length; index += 1) if (!present.has(index) && Atomics.load(depths, index) > 0) return true;
    return false;
  };
}

/** Writes waiting in every worker's queue together. */
export function instanceWriteDepth(memory: InstanceMemory): number {
  const depths = new Int32Array(memory.writeDepths);
  let total = 0;
  for (let index = 0; index < depths.length; index += 1) total += Atomics.load(depths, index);
  return total;
}

/** float64 ⇄ its bits, for keeping a time in a BigInt64Array that Atomics can compare and swap. */
const float = new Float64Array(1);
const bits = new BigInt64Array(float.buffer);

function toBits(value: number): bigint {
  float[0] = value;
  return bits[0] as bigint;
}

function fromBits(value: bigint): number {
  bits[0] = value;
  return float[0] as number;
}

/**
 * Token buckets every worker of the instance shares, in an open-addressing table: a key's slot is found by the hash
 * of its name and claimed with one compare-and-swap, and each update of its bucket is one compare-and-swap of its
 * time (retried when another worker changed it first). No lock, so a worker that dies at any point leaves every
 * bucket usable.
 */
export class SharedBucketCells implements BucketCells {
  readonly #keys: BigInt64Array;
  readonly #fullAt: BigInt64Array;
  /** Slots found, by key: this worker's keys are few (token names), and each is hashed once. */
  readonly #slots = new Map<string, number>();

  constructor(memory: InstanceMemory) {
    this.#keys = new BigInt64Array(memory.bucketKeys);
    this.#fullAt = new BigInt64Array(memory.bucketFullAt);
  }

  update(key: string, next: (fullAt: number) => number, done: (error: Error | null, fullAt: number) => void): void {
    const slot = this.#slotOf(key);
    for (;;) {
      const before = Atomics.load(this.#fullAt, slot);
      const fullAt = fromBits(before);
      const after = toBits(next(fullAt));
      if (after === before || Atomics.compareExchange(this.#fullAt, slot, before, after) === before) {
        done(null, fullAt);
        return;
      }
    }
  }

  /** A bucket that has refilled is a time in the past: nothing to let go of in a table of fixed size. */
  sweep(): void {}

  #slotOf(key: string): number {
    const known = this.#slots.get(key);
    if (known !== undefined) return known;
    // 0 marks a free slot, so no key hashes to it.
    const hash = createHash('sha256').update(key).digest().readBigInt64LE(0) || 1n;
    const home = Number(BigInt.asUintN(64, hash) % BigInt(BUCKET_SLOTS));
    let slot = home;
    for (let probe = 0; probe < BUCKET_SLOTS; probe += 1, slot = (slot + 1) % BUCKET_SLOTS) {
      const held = Atomics.compareExchange(this.#keys, slot, 0n, hash);
      if (held === 0n || held === hash) break;
    }
    // A full table (more names than BUCKET_SLOTS) ends the probe where it began: the key shares its home slot.
    this.#slots.set(key, slot);
    return slot;
  }
}
