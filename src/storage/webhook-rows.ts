import type { ClaimedWebhookEvent, WebhookRecord } from './webhook-store.js';

/**
 * Rows of the webhook tables as both databases' drivers return them, and their mapping to the webhook-store types.
 * The drivers differ only in how they give a time (`Time`: SQLite milliseconds since the epoch, PostgreSQL a Date)
 * and a small integer (`Count`: SQLite, reading integers as bigint, a bigint; PostgreSQL's int4 a number).
 */

/** The columns of a subscription that a WebhookRecord carries. */
export const WEBHOOK_RECORD_COLUMNS = 'name, url, secret, previous_secret, previous_secret_until, id_prefix, created_at, disabled_at, disabled_reason';

/** A webhook_subscriptions row of WEBHOOK_RECORD_COLUMNS. */
export interface WebhookRecordRowOf<Time> {
  readonly name: string;
  readonly url: string;
  readonly secret: string;
  readonly previous_secret: string | null;
  readonly previous_secret_until: Time | null;
  readonly id_prefix: string;
  readonly created_at: Time;
  readonly disabled_at: Time | null;
  readonly disabled_reason: string | null;
}

export function toWebhookRecord<Time>(row: WebhookRecordRowOf<Time>, toDate: (time: Time) => Date): WebhookRecord {
  const date = (time: Time | null) => (time === null ? null : toDate(time));
  return {
    name: row.name,
    url: row.url,
    secret: row.secret,
    previousSecret: row.previous_secret,
    previousSecretUntil: date(row.previous_secret_until),
    idPrefix: row.id_prefix,
    createdAt: toDate(row.created_at),
    disabledAt: date(row.disabled_at),
    disabledReason: row.disabled_reason,
  };
}

/** A webhook_events row as a claim returns it. */
export interface ClaimedEventRowOf<Time, Count> {
  readonly id: bigint;
  readonly subscription_id: bigint;
  readonly plant_id: bigint;
  readonly name: string;
  readonly tag: string | null;
  readonly created_at: Time;
  readonly attempts: Count;
  readonly retry_index: Count;
  readonly traceparent: string | null;
}

export function toClaimedEvent<Time, Count>(row: ClaimedEventRowOf<Time, Count>, toDate: (time: Time) => Date, toNumber: (count: Count) => number): ClaimedWebhookEvent {
  return {
    id: row.id,
    subscriptionId: row.subscription_id,
    plant: { id: row.plant_id, name: row.name, tag: row.tag },
    createdAt: toDate(row.created_at),
    attempts: toNumber(row.attempts),
    retryIndex: toNumber(row.retry_index),
    // Only when there is one: an event created untraced looks as it did before tracing existed.
    ...(row.traceparent === null ? {} : { traceparent: row.traceparent }),
  };
}
