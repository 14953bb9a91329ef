/** Where a stream starts (src/feed/starting-point.ts): the one rule both stores' streams follow. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startingPoint } from '../../src/feed/starting-point.js';

const INT64_MAX = 9223372036854775807n;

describe('startingPoint', () => {
  it('starts at the newest change without a cursor, and at the oldest kept one for 0, pruned or not', () => {
    assert.deepEqual(startingPoint(undefined, 130n, 31n), { cursor: 130n, reset: false });
    assert.deepEqual(startingPoint(0n, 130n, 31n), { cursor: 30n, reset: false });
    assert.deepEqual(startingPoint(0n, 130n, 1n), { cursor: 0n, reset: false });
    assert.deepEqual(startingPoint(0n, 0n, undefined), { cursor: 0n, reset: false });
    // Everything pruned: nothing kept to replay, live from the newest.
    assert.deepEqual(startingPoint(0n, 130n, undefined), { cursor: 130n, reset: false });
  });

  it('resets a cursor only when a change it needs is gone, or when the store never reached it', () => {
    assert.deepEqual(startingPoint(30n, 130n, 31n), { cursor: 30n, reset: false });
    assert.deepEqual(startingPoint(29n, 130n, 31n), { cursor: 130n, reset: true });
    assert.deepEqual(startingPoint(1n, 130n, 31n), { cursor: 130n, reset: true });
    assert.deepEqual(startingPoint(130n, 130n, 31n), { cursor: 130n, reset: false });
    assert.deepEqual(startingPoint(131n, 130n, 31n), { cursor: 130n, reset: true });
    assert.deepEqual(startingPoint(INT64_MAX, 130n, 31n), { cursor: 130n, reset: true });
    // Everything pruned: a cursor at the newest needs nothing; one before it needs what is gone.
    assert.deepEqual(startingPoint(130n, 130n, undefined), { cursor: 130n, reset: false });
    assert.deepEqual(startingPoint(129n, 130n, undefined), { cursor: 130n, reset: true });
  });
});
