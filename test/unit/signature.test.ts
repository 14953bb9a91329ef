/**
 * Webhook signatures (src/webhooks/signature.ts) byte for byte as the standardwebhooks package computes them, and the
 * secrets they are made with.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { generateWebhookSecret, webhookSignature } from '../../src/webhooks/signature.js';

describe('webhook signatures', () => {
  it('are what the standardwebhooks package signs, one per secret, space-separated', () => {
    const [first, second] = [generateWebhookSecret(), generateWebhookSecret()];
    const body = '{"id":9223372036854775807,"name":"Ω 🌱","tag":"\\"q\\""}';
    const at = 1_767_225_600;
    const expected = new Webhook(first).sign('msg_abc_1', new Date(at * 1000), body);
    assert.equal(webhookSignature([first], 'msg_abc_1', at, body), expected);
    const both = webhookSignature([first, second], 'msg_abc_1', at, body);
    assert.equal(both, `${expected} ${new Webhook(second).sign('msg_abc_1', new Date(at * 1000), body)}`);
  });

  it('use secrets of whsec_ and 32 random bytes, each new', () => {
    const secret = generateWebhookSecret();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
    assert.notEqual(secret, generateWebhookSecret());
  });
});
