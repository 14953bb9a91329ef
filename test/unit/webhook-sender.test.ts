/**
 * The webhook sender's reading of Retry-After (src/webhooks/sender.ts). The sender against real receivers is in
 * test/http/webhook-sender.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { retryAfterMs } from '../../src/webhooks/sender.js';

describe('Retry-After', () => {
  it('reads delay-seconds and HTTP-dates, and ignores the unreadable', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    assert.equal(retryAfterMs('120', now), 120_000);
    assert.equal(retryAfterMs('Thu, 01 Jan 2026 00:00:30 GMT', now), 30_000);
    assert.equal(retryAfterMs('Wed, 31 Dec 2025 00:00:00 GMT', now), 0);
    assert.equal(retryAfterMs('soon', now), undefined);
    assert.equal(retryAfterMs(undefined, now), undefined);
  });
});
