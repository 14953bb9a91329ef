import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

/** Standard Webhooks' prefix of a signing secret; the rest is the key, base64. */
const SECRET_PREFIX = 'whsec_';
/** 32 random bytes: above Standard Webhooks' minimum of 24, and a SHA-256 block's worth of key for HMAC. */
const SECRET_BYTES = 32;

export function generateWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** Random text in every webhook-id of one subscription (see webhookEventId): 12 lowercase hex digits. */
export function generateEventIdPrefix(): string {
  return randomBytes(6).toString('hex');
}

/** Keys by secret: a KeyObject made once, since createHmac would otherwise wrap the raw bytes anew for every attempt. */
const keys = new Map<string, KeyObject>();
const KEYS_KEPT = 1000;

function key(secret: string): KeyObject {
  let found = keys.get(secret);
  if (!found) {
    if (keys.size >= KEYS_KEPT) keys.clear();
    found = createSecretKey(Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'));
    keys.set(secret, found);
  }
  return found;
}

/**
 * The webhook-signature header: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body` under each secret, space-separated
 * (Standard Webhooks: a receiver accepts the message if any signature matches, which is what lets a rotated secret
 * and its predecessor both sign for a while). node:crypto rather than the standardwebhooks package's pure-JavaScript
 * SHA-256: the same bytes (test/unit/signature.test.ts checks them against the package), at native speed on the
 * server's one event loop.
 */
export function webhookSignature(secrets: readonly string[], id: string, timestampSeconds: number, body: string): string {
  return secrets.map((secret) => `v1,${createHmac('sha256', key(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`).join(' ');
}
