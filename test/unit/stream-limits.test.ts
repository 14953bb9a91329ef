import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StreamLimits } from '../../src/http/stream-limits.js';

describe('StreamLimits', () => {
  it('counts streams per token and per address, refuses one more with 429, and releases each once', () => {
    const limits = new StreamLimits(2, 3);
    const a1 = limits.open('a', '10.0.0.1');
    limits.open('a', '10.0.0.2');
    assert.throws(() => limits.open('a', '10.0.0.3'), (error: { status?: number }) => error.status === 429);
    a1();
    a1();
    limits.open('a', '10.0.0.3');
    assert.throws(() => limits.open('a', '10.0.0.3'), /token/);
    limits.open('b', '10.0.0.1');
    limits.open('c', '10.0.0.1');
    limits.open('d', '10.0.0.1');
    assert.throws(() => limits.open('e', '10.0.0.1'), /address/);
  });
});
