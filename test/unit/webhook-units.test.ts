/**
 * The webhook module's small parts, against their references: signatures byte for byte as the standardwebhooks
 * package computes them, the address policy over every kind of range, Retry-After, and what a subscription URL may be.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { webhookEventId, webhookEventRowId } from '../../src/storage/webhook-store.js';
import { refusedAddressReason, subscriptionUrlProblem } from '../../src/webhooks/address-policy.js';
import { retryAfterMs } from '../../src/webhooks/sender.js';
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

  it('webhook-ids carry the row id exactly and are read back', () => {
    const id = webhookEventId('0a1b2c3d4e5f', 9223372036854775807n);
    assert.equal(id, 'msg_0a1b2c3d4e5f_9223372036854775807');
    assert.deepEqual(webhookEventRowId(id), { idPrefix: '0a1b2c3d4e5f', rowId: 9223372036854775807n });
    for (const bad of ['msg_x_9223372036854775808', 'msg__1', 'msg_a_01', 'evt_a_1', 'msg_a_1 ']) assert.equal(webhookEventRowId(bad), undefined, bad);
  });
});

describe('the address policy', () => {
  const refused: Array<[string, RegExp]> = [
    ['127.0.0.1', /loopback/],
    ['127.255.0.9', /loopback/],
    ['::1', /loopback/],
    ['10.0.0.1', /private/],
    ['172.16.5.4', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.1', /private/],
    ['169.254.169.254', /link-local/],
    ['fe80::1', /link-local/],
    ['fc00::1', /unique-local/],
    ['fd12:3456::1', /unique-local/],
    ['0.0.0.0', /unspecified/],
    ['::', /unspecified/],
    ['::ffff:127.0.0.1', /loopback/],
    ['::ffff:10.0.0.1', /private/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['224.0.0.1', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['64:ff9b::a00:1', /rfc6052/],
    ['2002:7f00:1::', /6to4/],
  ];
  for (const [address, why] of refused) {
    it(`refuses ${address}`, () => assert.match(refusedAddressReason(address) ?? 'allowed', why));
  }
  for (const address of ['93.184.216.34', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
    it(`allows the public ${address}`, () => assert.equal(refusedAddressReason(address), undefined));
  }
});

describe('subscription URLs', () => {
  it('must be http(s), without credentials, and not name a refused address or localhost unless allowed', () => {
    assert.equal(subscriptionUrlProblem('https://hooks.example.com/x?k=v', false), undefined);
    assert.equal(subscriptionUrlProblem('http://93.184.216.34:8080/', false), undefined);
    assert.match(subscriptionUrlProblem('http://127.0.0.1/', false) ?? '', /loopback.*WEBHOOK_ALLOW_PRIVATE_NETWORKS/);
    assert.match(subscriptionUrlProblem('http://2130706433/', false) ?? '', /127\.0\.0\.1 is a loopback/, 'the URL parser canonicalises it first');
    assert.match(subscriptionUrlProblem('http://[::1]:9/', false) ?? '', /loopback/);
    assert.match(subscriptionUrlProblem('http://api.localhost/', false) ?? '', /loopback name/);
    assert.match(subscriptionUrlProblem('file:///etc/passwd', false) ?? '', /https:\/\/ or http:\/\//);
    assert.match(subscriptionUrlProblem('https://u:p@example.com/', false) ?? '', /user name or password/);
    assert.match(subscriptionUrlProblem('nope', false) ?? '', /not a URL/);
    assert.equal(subscriptionUrlProblem('http://127.0.0.1/', true), undefined);
  });
});

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
