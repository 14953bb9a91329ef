/**
 * TokenBucketStore on a FakeClock: a bucket of `burst` tokens per key, refilled at `max` per `windowMs`, answering
 * @fastify/rate-limit's incr with `current` (allowed while at most `burst`) and `ttl` (ms until full when allowed,
 * until the next token when refused). No test sleeps. Every scenario runs on both kinds of buckets: a map in this
 * thread, and the shared memory the worker threads of an instance keep them in (src/workers/shared-memory.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RateLimitConfig } from '../../src/config/config.js';
import { LocalBucketCells, TokenBucketStore, type BucketCells } from '../../src/http/rate-limit.js';
import { SharedBucketCells, createInstanceMemory } from '../../src/workers/shared-memory.js';
import { FakeClock } from '../helpers/clock.js';

interface Answer {
  readonly current: number;
  readonly ttl: number;
}

/** One request by `key`: the store answers synchronously. */
function take(store: TokenBucketStore, key = 'token'): Answer {
  let answer: Answer | undefined;
  store.incr(key, (error, result) => {
    assert.equal(error, null);
    answer = result;
  });
  assert.ok(answer, 'incr answered at once');
  return answer;
}

const CELLS: ReadonlyArray<readonly [kind: string, make: () => BucketCells]> = [
  ['in this thread', () => new LocalBucketCells()],
  ['in shared memory', () => new SharedBucketCells(createInstanceMemory(1))],
];

/** A step of a scenario: move the clock on by `advanceMs`, send one request, expect this answer. */
type Step = readonly [advanceMs: number, expected: Answer];

const allowed = (current: number, ttl: number): Answer => ({ current, ttl });

for (const [kind, makeCells] of CELLS) describe(`TokenBucketStore, buckets ${kind}`, () => {
  const bucket = (config: RateLimitConfig): { store: TokenBucketStore; clock: FakeClock } => {
    const clock = new FakeClock(1_000_000);
    return { store: new TokenBucketStore(config, clock.now, makeCells()), clock };
  };

  const scenarios: ReadonlyArray<{ name: string; config: RateLimitConfig; steps: readonly Step[] }> = [
    {
      // 2 per 2 s is one token a second; 4 may go at once.
      name: 'a burst of 4, then one request a second, refused with the time to the next token',
      config: { max: 2, windowMs: 2000, burst: 4 },
      steps: [
        [0, allowed(1, 1000)],
        [0, allowed(2, 2000)],
        [0, allowed(3, 3000)],
        [0, allowed(4, 4000)],
        [0, { current: 5, ttl: 1000 }],
        [999, { current: 5, ttl: 1 }],
        [1, allowed(4, 4000)],
        // One interval earned one token, not a new burst.
        [0, { current: 5, ttl: 1000 }],
        [400, { current: 5, ttl: 600 }],
      ],
    },
    {
      // 10 per 100 ms: after 300 ms idle, a bucket without a cap would hold 30.
      name: 'a bucket refills to the burst and never beyond it',
      config: { max: 10, windowMs: 100, burst: 2 },
      steps: [
        [0, allowed(1, 10)],
        [0, allowed(2, 20)],
        [300, allowed(1, 10)],
        [0, allowed(2, 20)],
        [0, { current: 3, ttl: 10 }],
      ],
    },
    {
      name: '3 a minute: the next token is 20 s away',
      config: { max: 3, windowMs: 60_000, burst: 3 },
      steps: [
        [0, allowed(1, 20_000)],
        [0, allowed(2, 40_000)],
        [0, allowed(3, 60_000)],
        [0, { current: 4, ttl: 20_000 }],
        [19_999, { current: 4, ttl: 1 }],
        [1, allowed(3, 60_000)],
      ],
    },
    {
      // A token every 1/3 ms: fractions of a millisecond refill fractions of a token, and none is lost to rounding.
      name: 'a high rate refills by fractions of a millisecond',
      config: { max: 3, windowMs: 1, burst: 1 },
      steps: [
        [0, allowed(1, 1)],
        [0, { current: 2, ttl: 1 }],
        [0.3, { current: 2, ttl: 1 }],
        [0.04, allowed(1, 1)],
      ],
    },
    {
      name: 'a burst of 1 allows one request per interval and no more',
      config: { max: 1, windowMs: 1000, burst: 1 },
      steps: [
        [0, allowed(1, 1000)],
        [0, { current: 2, ttl: 1000 }],
        [1000, allowed(1, 1000)],
        [5000, allowed(1, 1000)],
        [0, { current: 2, ttl: 1000 }],
      ],
    },
  ];
  for (const { name, config, steps } of scenarios) {
    it(name, () => {
      const { store, clock } = bucket(config);
      for (const [index, [advanceMs, expected]] of steps.entries()) {
        clock.advance(advanceMs);
        assert.deepEqual(take(store), expected, `request ${index + 1}, after ${advanceMs} ms more`);
      }
    });
  }

  it('keeps one bucket per key', () => {
    const { store } = bucket({ max: 1, windowMs: 1000, burst: 1 });
    assert.deepEqual(take(store, 'a'), allowed(1, 1000));
    assert.equal(take(store, 'a').current, 2);
    assert.deepEqual(take(store, 'b'), allowed(1, 1000));
    assert.equal(take(store, 'b').current, 2);
  });

  it('is its own child: the limit is per token whatever the route', () => {
    const { store } = bucket({ max: 1, windowMs: 1000, burst: 1 });
    assert.equal(store.child(), store);
  });
});

describe('TokenBucketStore on shared memory', () => {
  it('two stores (two workers) on one instance memory draw from one bucket per key', () => {
    const memory = createInstanceMemory(2);
    const clock = new FakeClock(1_000_000);
    const config = { max: 1, windowMs: 1000, burst: 3 };
    const one = new TokenBucketStore(config, clock.now, new SharedBucketCells(memory));
    const two = new TokenBucketStore(config, clock.now, new SharedBucketCells(memory));
    assert.deepEqual(take(one), allowed(1, 1000));
    assert.deepEqual(take(two), allowed(2, 2000));
    assert.deepEqual(take(one), allowed(3, 3000));
    assert.deepEqual(take(two), { current: 4, ttl: 1000 });
    // Another key has its own bucket in both.
    assert.deepEqual(take(two, 'other'), allowed(1, 1000));
    clock.advance(1000);
    assert.deepEqual(take(one), allowed(3, 3000));
  });
});
