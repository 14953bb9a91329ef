import { WebhookVerificationError } from './errors.js';
import { parseExact } from './json.js';
import type { StoredPlant, WebhookEvent } from './types.js';

/**
 * Checking a webhook as Standard Webhooks define it (docs/webhooks.md): `webhook-signature` holds one or more
 * space-separated `v1,<base64 HMAC-SHA256>` of `webhook-id.webhook-timestamp.body` under the secret's key (the base64
 * after `whsec_`), any one of which may match; `webhook-timestamp` is Unix seconds within the tolerance of now. The
 * body is checked as the raw bytes received, then parsed with exact ids. Web Crypto, so it runs in Node and browsers.
 */

/** Header values as Node's IncomingHttpHeaders, a plain record or a fetch Headers hold them. */
export type WebhookHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyWebhookInput {
  readonly headers: WebhookHeaders;
  /** The body exactly as received: its bytes, or its text decoded as UTF-8. Never a re-serialized object. */
  readonly body: string | Uint8Array;
  /** The subscription's secret, `whsec_…`, as `plantstore webhook add` printed it. */
  readonly secret: string;
  /** How far the timestamp may be from now, in seconds (Standard Webhooks: 5 minutes). */
  readonly toleranceSeconds?: number;
  /** Now, in milliseconds since the epoch (for tests). */
  readonly now?: number;
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  const found = Object.keys(record).find((key) => key.toLowerCase() === name);
  const value = found === undefined ? undefined : record[found];
  return Array.isArray(value) ? value.join(' ') : (value as string | undefined);
}

function base64Bytes(text: string): Uint8Array | undefined {
  try {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
    return bytes;
  } catch {
    return undefined;
  }
}

const keys = new Map<string, ReturnType<typeof crypto.subtle.importKey>>();

function hmacKey(secret: string): ReturnType<typeof crypto.subtle.importKey> {
  let key = keys.get(secret);
  if (!key) {
    const raw = base64Bytes(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
    if (!raw || raw.length === 0) throw new WebhookVerificationError('the secret is not base64 (whsec_…)');
    if (keys.size >= 100) keys.clear();
    key = crypto.subtle.importKey('raw', raw as Uint8Array<ArrayBuffer>, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    keys.set(secret, key);
  }
  return key;
}

/** The webhook's event once its signature and timestamp check out; a WebhookVerificationError otherwise. */
export async function verifyWebhook(input: VerifyWebhookInput): Promise<WebhookEvent> {
  const id = header(input.headers, 'webhook-id');
  const timestampText = header(input.headers, 'webhook-timestamp');
  const signatures = header(input.headers, 'webhook-signature');
  if (!id || !timestampText || !signatures) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature');
  if (!/^\d{1,12}$/.test(timestampText)) throw new WebhookVerificationError('webhook-timestamp is not Unix seconds');
  const timestamp = Number(timestampText);
  const tolerance = input.toleranceSeconds ?? 300;
  const now = Math.floor((input.now ?? Date.now()) / 1000);
  if (timestamp < now - tolerance) throw new WebhookVerificationError('webhook-timestamp is too old');
  if (timestamp > now + tolerance) throw new WebhookVerificationError('webhook-timestamp is too new');

  const encoder = new TextEncoder();
  const body = typeof input.body === 'string' ? encoder.encode(input.body) : input.body;
  const prefix = encoder.encode(`${id}.${timestampText}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix);
  signed.set(body, prefix.length);
  const key = await hmacKey(input.secret);
  let matched = false;
  for (const candidate of signatures.split(' ')) {
    const [version, value] = candidate.split(',', 2);
    if (version !== 'v1' || value === undefined) continue;
    const bytes = base64Bytes(value);
    // crypto.subtle.verify compares in constant time.
    if (bytes && (await crypto.subtle.verify('HMAC', key, bytes as Uint8Array<ArrayBuffer>, signed))) matched = true;
  }
  if (!matched) throw new WebhookVerificationError('no signature matches');
  let plant: StoredPlant;
  try {
    plant = parseExact<StoredPlant>(typeof input.body === 'string' ? input.body : new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch (error) {
    throw new WebhookVerificationError('the signed body is not JSON', { cause: error });
  }
  return { type: 'newPlant', webhookId: id, timestamp, plant };
}
