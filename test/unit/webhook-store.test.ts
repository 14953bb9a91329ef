/**
 * The webhook-id of an event (src/storage/webhook-store.ts): the subscription's random prefix and the outbox row id,
 * exact to int64, and read back.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { webhookEventId, webhookEventRowId } from '../../src/storage/webhook-store.js';

describe('webhook event ids', () => {
  it('webhook-ids carry the row id exactly and are read back', () => {
    const id = webhookEventId('0a1b2c3d4e5f', 9223372036854775807n);
    assert.equal(id, 'msg_0a1b2c3d4e5f_9223372036854775807');
    assert.deepEqual(webhookEventRowId(id), { idPrefix: '0a1b2c3d4e5f', rowId: 9223372036854775807n });
    for (const bad of ['msg_x_9223372036854775808', 'msg__1', 'msg_a_01', 'evt_a_1', 'msg_a_1 ']) assert.equal(webhookEventRowId(bad), undefined, bad);
  });
});
