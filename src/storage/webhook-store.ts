import type { Plant } from '../plant.js';

/**
 * The two webhook sub-stores: the subscriptions (`Store.webhookSubscriptions`) the operator manages and `plantstore
 * copy` moves, and their outbox (`Store.webhookOutbox`) that creates write and the dispatcher delivers. Each consumer
 * sees the slice it needs: the CLI WebhookSubscriptions, `plantstore copy` WebhookTransfer, the dispatcher
 * WebhookOutbox. Each database implements each in a module of its own (src/storage/sqlite/webhook-subscriptions.ts
 * and webhook-outbox.ts, src/storage/postgres/webhook-subscriptions.ts and webhook-outbox.ts); what a round of
 * attempts changes is decided once, in ./webhook-settlement.ts.
 *
 * Events are written by the plant store's create itself, in the transaction (SQLite) or statement (PostgreSQL) that
 * stores the plants: one per created plant and active subscription, so a plant answered 200 is never without its events.
 */

/** A webhook subscription as stored, with everything another database needs to go on signing as it did. */
export interface WebhookRecord {
  readonly name: string;
  readonly url: string;
  /** The signing secret: recoverable, since it signs. */
  readonly secret: string;
  /** The secret before the latest rotation, and when it stops signing; both null when there is none. */
  readonly previousSecret: string | null;
  readonly previousSecretUntil: Date | null;
  readonly idPrefix: string;
  readonly createdAt: Date;
  readonly disabledAt: Date | null;
  readonly disabledReason: string | null;
}

export type WebhookImportOutcome =
  | { readonly kind: 'created' }
  /** A subscription of that name was stored already with the same content (the id prefix aside): nothing was changed. */
  | { readonly kind: 'replayed' }
  /** A subscription of that name differs: nothing was changed. */
  | { readonly kind: 'conflict' };

/** Moving webhook subscriptions between databases (`plantstore copy`); their events and deliveries stay behind. */
interface WebhookTransfer {
  /** Every subscription with its secrets and state, in ascending byte order of name. Made by hand, so they are few. */
  exportAll(): Promise<WebhookRecord[]>;
  /**
   * Stores subscriptions as another database had them, all committed durably in one transaction before the promise
   * resolves; one outcome per subscription, in input order. The id prefix is not compared with a stored one's: the
   * caller may give a new one, and a subscription stored earlier keeps its own.
   */
  importAll(subscriptions: readonly WebhookRecord[]): Promise<WebhookImportOutcome[]>;
}

/** Whether two subscriptions hold the same content; the id prefix aside, as importAll compares them. */
export function isSameWebhook(a: WebhookRecord, b: WebhookRecord): boolean {
  const time = (date: Date | null) => date?.getTime() ?? null;
  return (
    a.name === b.name &&
    a.url === b.url &&
    a.secret === b.secret &&
    a.previousSecret === b.previousSecret &&
    time(a.previousSecretUntil) === time(b.previousSecretUntil) &&
    time(a.createdAt) === time(b.createdAt) &&
    time(a.disabledAt) === time(b.disabledAt) &&
    a.disabledReason === b.disabledReason
  );
}

/** A webhook subscription as the operator adds it; the secret is stored so that it can sign (it must be recoverable). */
export interface NewWebhookSubscription {
  readonly name: string;
  readonly url: string;
  /** `whsec_` + base64 of the key. */
  readonly secret: string;
  /** Random text in every webhook-id of this subscription, so ids never repeat across subscriptions or databases. */
  readonly idPrefix: string;
  readonly createdAt: Date;
}

/** What `plantstore webhook list` shows: never a secret. Totals count since the subscription was added. */
export interface WebhookSubscriptionInfo {
  readonly name: string;
  readonly url: string;
  readonly createdAt: Date;
  readonly disabledAt: Date | null;
  readonly disabledReason: string | null;
  readonly lastSuccessAt: Date | null;
  readonly lastFailureAt: Date | null;
  readonly lastError: string | null;
  /** Events not yet delivered nor given up on. */
  readonly waiting: number;
  readonly delivered: number;
  /** Failed attempts followed by another. */
  readonly retried: number;
  /** Events given up on after the whole retry schedule. */
  readonly failed: number;
}

/** An active subscription as the dispatcher needs it, secrets included. */
export interface ActiveWebhookSubscription {
  readonly id: bigint;
  readonly name: string;
  readonly url: string;
  readonly idPrefix: string;
  /** The current secret first, then the previous one while its grace period after a rotation lasts. */
  readonly secrets: readonly string[];
}

/** One event claimed for one attempt: the plant as created, for one subscription. */
export interface ClaimedWebhookEvent {
  readonly id: bigint;
  readonly subscriptionId: bigint;
  readonly plant: Plant;
  readonly createdAt: Date;
  /** Attempts made before this one. */
  readonly attempts: number;
  /** Failed attempts already followed by a retry: the position in the retry schedule; -1 for a redelivery's one attempt. */
  readonly retryIndex: number;
  /** The W3C traceparent of the request that created the plant (src/tracing/), when it was traced. */
  readonly traceparent?: string;
}

/** What became of one attempt, as the dispatcher decided it. */
export type WebhookAttemptOutcome =
  | { readonly kind: 'delivered' }
  /** Tried again after `retryInMs`; `disable` also disables the subscription at once (410 Gone), with that reason. */
  | { readonly kind: 'retry'; readonly retryInMs: number; readonly disable?: string }
  /**
   * The schedule is spent: the event is marked failed (kept for redelivery). If the subscription has not succeeded
   * since the event was created, it failed for the whole schedule and is disabled with `disableReason`.
   */
  | { readonly kind: 'failed'; readonly disableReason: string }
  /** Never sent (shutdown cut it short): the claim is released and no attempt is counted. */
  | { readonly kind: 'released' };

export interface WebhookAttemptResult {
  readonly event: ClaimedWebhookEvent;
  readonly attemptedAt: Date;
  /** The HTTP status answered, if any. */
  readonly status: number | null;
  /** Why it failed, in a few words (a timeout, a refused address, a connection error); null on success. */
  readonly error: string | null;
  readonly outcome: WebhookAttemptOutcome;
}

export interface WebhookClaim {
  readonly subscriptionId: bigint;
  readonly limit: number;
}

export interface WebhookDelivery {
  readonly eventId: string;
  readonly subscription: string;
  readonly plantId: bigint;
  readonly attempt: number;
  readonly attemptedAt: Date;
  readonly status: number | null;
  readonly error: string | null;
}

/** Which attempts `deliveries` lists: of one subscription when named, only failed ones when asked, at most `limit`. */
export interface DeliveriesQuery {
  readonly name?: string;
  readonly failedOnly: boolean;
  readonly limit: number;
}

/** What a round trip of the dispatcher brings back: the events claimed, and the subscriptions the results disabled. */
export interface SettledAndClaimed {
  readonly claimed: ClaimedWebhookEvent[];
  readonly disabled: Array<{ readonly name: string; readonly reason: string }>;
}

export type RedeliverResult = 'scheduled' | 'scheduled-disabled' | 'not-found';

/** What the operator manages (`plantstore webhook …`). */
interface WebhookSubscriptions {
  /** Rejects with DuplicateWebhookNameError when the name is taken. */
  add(subscription: NewWebhookSubscription): Promise<void>;
  list(): Promise<WebhookSubscriptionInfo[]>;
  /** Removes the subscription and its events; false when there is none by that name. */
  remove(name: string): Promise<boolean>;
  /** Enabling clears the reason and lets its waiting events be sent; false when there is none by that name. */
  setEnabled(name: string, enabled: boolean, reason: string): Promise<boolean>;
  /** The new secret signs from now on; the previous one also signs for `graceMs`. False when there is none by that name. */
  rotateSecret(name: string, secret: string, graceMs: number): Promise<boolean>;
  /** The most recent attempts first, of one subscription when named, only failed ones when asked. */
  deliveries(query: DeliveriesQuery): Promise<WebhookDelivery[]>;
  /**
   * Makes the event (delivered or failed, of a subscription that still exists) due now for one more attempt; its retry
   * index becomes -1, so a failure marks it failed again rather than starting the schedule over.
   */
  redeliver(eventId: string): Promise<RedeliverResult>;
}

/** What the dispatcher (src/webhooks/) needs: it claims due events and settles attempts here. */
export interface WebhookOutbox {
  active(): Promise<ActiveWebhookSubscription[]>;
  /**
   * Records what became of finished attempts (as ./webhook-settlement.ts plans it), then claims due events for the
   * given subscriptions, in one transaction. A claim is a lease for `leaseMs`: no other caller gets the event until it
   * is settled or the lease runs out (a crashed server's events are sent again after that). The subscriptions
   * disabled come back with their reasons so that the dispatcher can log them.
   */
  settleAndClaim(
    results: readonly WebhookAttemptResult[],
    claims: readonly WebhookClaim[],
    leaseMs: number,
  ): Promise<SettledAndClaimed>;
  /**
   * Releases every lease: for a store only one process dispatches from (SQLite), whose leases a restart makes void.
   * PostgreSQL leaves them to expire, since another replica may hold them.
   */
  releaseLeases(): Promise<void>;
  /** Events waiting, over all active subscriptions. */
  countWaiting(): Promise<number>;
  /**
   * Deletes delivered events (and their attempts) delivered more than `retentionMs` ago, and previous secrets whose
   * grace has ended, in bounded chunks; resolves with the number of events deleted.
   */
  prune(retentionMs: number): Promise<number>;
}

/** A database's webhook subscriptions, both slices of them (`Store.webhookSubscriptions`). */
export interface WebhookSubscriptionStore extends WebhookSubscriptions, WebhookTransfer {}

/** The webhook-id of an event: the subscription's random prefix and the event's row id, never reused. */
export function webhookEventId(idPrefix: string, rowId: bigint): string {
  return `msg_${idPrefix}_${rowId}`;
}

/** The row id in a webhook-id, or undefined when the text is not one. */
export function webhookEventRowId(eventId: string): { idPrefix: string; rowId: bigint } | undefined {
  const match = /^msg_([a-z0-9]{1,64})_([1-9][0-9]{0,18})$/.exec(eventId);
  if (!match) return undefined;
  const rowId = BigInt(match[2] as string);
  return rowId <= 9223372036854775807n ? { idPrefix: match[1] as string, rowId } : undefined;
}
