import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pruneThrough } from '../../src/storage/change-store.js';

describe('pruneThrough', () => {
  it('prunes past the newest maxCount and what expired, never the newest change', () => {
    assert.equal(pruneThrough(0n, 10, undefined), undefined);
    assert.equal(pruneThrough(5n, 10, undefined), undefined);
    assert.equal(pruneThrough(15n, 10, undefined), 5n);
    assert.equal(pruneThrough(15n, 10, 8n), 8n);
    assert.equal(pruneThrough(15n, 10, 3n), 5n);
    assert.equal(pruneThrough(15n, 10, 15n), 14n);
    assert.equal(pruneThrough(15n, 0, undefined), 14n);
  });
});

