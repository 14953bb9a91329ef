/**
 * shareOf (src/http/http-server.ts): how an instance-wide limit is divided among the instance's threads.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { shareOf } from '../../src/http/http-server.js';

describe('shareOf', () => {
  it('gives each of the threads an equal share of an instance-wide limit, rounded up, at least 1', () => {
    assert.equal(shareOf(128, 1), 128);
    assert.equal(shareOf(128, 3), 43);
    assert.equal(shareOf(1, 4), 1);
  });
});
