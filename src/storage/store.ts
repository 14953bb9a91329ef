import type { StorageObserver } from './observer.js';

/**
 * The storage interfaces. Each consumer sees only what it needs: the write queue and the plant service a
 * PlantStore, the token cache a TokenStore, readiness a WritableCheck. Both databases implement all of them as one
 * Store; test/storage-contract.test.ts holds the two to the same rules. Rows of either database are mapped to these
 * types before they leave storage, and failures are storage's own errors (./errors.ts), never HTTP ones.
 */
export interface StoredPlant {
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}

export type PlantToCreate = StoredPlant;

export interface PlantQuery {
  readonly limit: number;
  readonly after?: bigint;
  readonly tag?: string;
}

export type CreateOutcome =
  | { readonly status: 'created' }
  | { readonly status: 'exists'; readonly stored: StoredPlant }
  /** This row alone could not be stored; the rest of its batch is unaffected. */
  | { readonly status: 'failed'; readonly error: Error };

export interface PlantStore {
  /**
   * Stores new plants, each committed durably before the promise resolves. SQLite commits the call as one
   * transaction; PostgreSQL as one insert statement, plus a read of ids already stored and a retry for any deleted
   * in between, each committing on its own. The promise rejects only when nothing was stored; a failure after some
   * rows committed fails the rest row by row. A repeated id is created once and its later copies are answered as
   * the first left it. An id already stored is left as it is and reported with its stored content.
   */
  createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]>;
  getPlant(id: bigint): Promise<StoredPlant | undefined>;
  /** Plants in ascending id order, strictly after `after` when given (keyset paging), only with `tag` when given. */
  listPlants(query: PlantQuery): Promise<StoredPlant[]>;
  /** Resolves false when no plant has that id; committed durably before it resolves. */
  deletePlant(id: bigint): Promise<boolean>;
}

export interface StoredToken {
  readonly name: string;
  /** SHA-256 of the token; the token itself is never stored. */
  readonly hash: Buffer;
}

export interface TokenInfo {
  readonly name: string;
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
}

export interface TokenStore {
  /** Rejects with DuplicateTokenNameError when the name is taken. */
  addToken(name: string, hash: Buffer, createdAt: Date): Promise<void>;
  listTokens(): Promise<TokenInfo[]>;
  /** Resolves false when no token has that name. */
  revokeToken(name: string): Promise<boolean>;
  findToken(hash: Buffer): Promise<StoredToken | undefined>;
  /** Every token that is currently valid. */
  allTokens(): Promise<StoredToken[]>;
  recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void>;
}

/** A token as stored, with everything another database needs to keep it working: never the token itself. */
export interface TokenRecord {
  readonly name: string;
  /** SHA-256 of the token. */
  readonly hash: Buffer;
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
}

export type TokenImportOutcome =
  | { readonly status: 'created' }
  /** The same name, hash and creation time were stored already; the last use was moved forward if this one is later. */
  | { readonly status: 'exists' }
  /** Another token holds this name or this hash: nothing was changed. */
  | { readonly status: 'conflict'; readonly stored: TokenRecord };

/** Moving tokens between databases (`plantstore copy`): clients keep working with the tokens they have. */
export interface TokenTransfer {
  /** Every token with its hash and times, in ascending byte order of name. Tokens are made by hand, so they are few. */
  exportTokens(): Promise<TokenRecord[]>;
  /**
   * Stores tokens as another database had them (hashes, creation and last-use times), all committed durably in one
   * transaction before the promise resolves; one outcome per token, in input order. A token already stored
   * identically is left as it is except that its last use moves forward, never back (as recordTokenUse does).
   */
  importTokens(tokens: readonly TokenRecord[]): Promise<TokenImportOutcome[]>;
}

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
  | { readonly status: 'created' }
  /** A subscription of that name was stored already with the same content (the id prefix aside): nothing was changed. */
  | { readonly status: 'exists' }
  /** A subscription of that name differs: nothing was changed. */
  | { readonly status: 'conflict' };

/** Moving webhook subscriptions between databases (`plantstore copy`); their events and deliveries stay behind. */
export interface WebhookTransfer {
  /** Every subscription with its secrets and state, in ascending byte order of name. Made by hand, so they are few. */
  exportWebhooks(): Promise<WebhookRecord[]>;
  /**
   * Stores subscriptions as another database had them, all committed durably in one transaction before the promise
   * resolves; one outcome per subscription, in input order. The id prefix is not compared with a stored one's: the
   * caller may give a new one, and a subscription stored earlier keeps its own.
   */
  importWebhooks(subscriptions: readonly WebhookRecord[]): Promise<WebhookImportOutcome[]>;
}

/** Whether two subscriptions hold the same content; the id prefix aside, as importWebhooks compares them. */
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

export interface WritableCheck {
  /**
   * Resolves once a one-row heartbeat write has been committed durably, proving the store can take writes now (a
   * read alone would pass on a full disk, a locked file or a read-only database); rejects with
   * StorageUnavailableError otherwise, within a bounded time.
   */
  checkWritable(): Promise<void>;
}

/** Something storage noticed by itself, outside any request (a background thread died, checkpoints keep failing). */
export interface StorageIncident {
  readonly level: 'error' | 'warn' | 'info';
  readonly message: string;
  readonly error?: Error;
}

/** A connection pool's state at one moment. */
export interface ConnectionPoolState {
  /** Connections open, idle or in use. */
  readonly total: number;
  readonly idle: number;
  /** Queries waiting for a connection. */
  readonly waiting: number;
}

/** One open database: every interface above, what it can do, what it notices by itself, and how to let it go. */
export interface Store extends PlantStore, TokenStore, TokenTransfer, WritableCheck, WebhookStore, WebhookTransfer {
  readonly kind: 'sqlite' | 'postgres';
  /** Batches of creates this store can usefully commit at once: 1 for a single-writer database. */
  readonly writeConcurrency: number;
  /**
   * Calls `listener` with every incident from now on, and with those that happened before anyone listened; returns
   * the function that stops it. Storage has no logger of its own: services.ts logs what it hears here.
   */
  onIncident(listener: (incident: StorageIncident) => void): () => void;
  /**
   * Reports every failure from now on to `observer` (replacing the previous one); until called, nobody is told. Both
   * databases have it; a store that stands in for one and cannot fail (bench/app-only.ts) may leave it out.
   */
  observe?(observer: StorageObserver): void;
  /** The pool's state now, for a store that has a pool of connections (PostgreSQL); cheap, read when metrics are scraped. */
  connectionPoolState?(): ConnectionPoolState;
  close(): Promise<void>;
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
  readonly plant: StoredPlant;
  readonly createdAt: Date;
  /** Attempts made before this one. */
  readonly attempts: number;
  /** Failed attempts already followed by a retry: the position in the retry schedule; -1 for a redelivery's one attempt. */
  readonly retryIndex: number;
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

export type RedeliverResult = 'scheduled' | 'scheduled-disabled' | 'not-found';

/**
 * Webhook subscriptions and their outbox. Events are written by createPlants itself, in the transaction (SQLite) or
 * statement (PostgreSQL) that stores the plants: one per created plant and active subscription, so a plant answered
 * 200 is never without its events. The dispatcher (src/webhooks/) claims due events and settles attempts here.
 */
export interface WebhookStore {
  /** Rejects with DuplicateWebhookNameError when the name is taken. */
  addWebhook(subscription: NewWebhookSubscription): Promise<void>;
  listWebhooks(): Promise<WebhookSubscriptionInfo[]>;
  /** Removes the subscription and its events; false when there is none by that name. */
  removeWebhook(name: string): Promise<boolean>;
  /** Enabling clears the reason and lets its waiting events be sent; false when there is none by that name. */
  setWebhookEnabled(name: string, enabled: boolean, reason: string): Promise<boolean>;
  /** The new secret signs from now on; the previous one also signs for `graceMs`. False when there is none by that name. */
  rotateWebhookSecret(name: string, secret: string, graceMs: number): Promise<boolean>;
  /** The most recent attempts first, of one subscription when named, only failed ones when asked. */
  webhookDeliveries(query: { readonly name?: string; readonly failedOnly: boolean; readonly limit: number }): Promise<WebhookDelivery[]>;
  /**
   * Makes the event (delivered or failed, of a subscription that still exists) due now for one more attempt; its retry
   * index becomes -1, so a failure marks it failed again rather than starting the schedule over.
   */
  redeliverWebhookEvent(eventId: string): Promise<RedeliverResult>;

  activeWebhooks(): Promise<ActiveWebhookSubscription[]>;
  /**
   * Records what became of finished attempts, then claims due events for the given subscriptions, in one transaction.
   * A claim is a lease for `leaseMs`: no other caller gets the event until it is settled or the lease runs out (a
   * crashed instance's events are sent again after that). Resolves with the events claimed and the subscriptions the
   * results disabled (names and reasons), so the dispatcher can log them.
   */
  settleAndClaimWebhookEvents(
    results: readonly WebhookAttemptResult[],
    claims: readonly WebhookClaim[],
    leaseMs: number,
  ): Promise<{ claimed: ClaimedWebhookEvent[]; disabled: Array<{ name: string; reason: string }> }>;
  /**
   * Releases every lease: for a store only one process dispatches from (SQLite), whose leases a restart makes void.
   * PostgreSQL leaves them to expire, since another instance may hold them.
   */
  releaseWebhookLeases(): Promise<void>;
  /** Events waiting, over all active subscriptions. */
  countWaitingWebhookEvents(): Promise<number>;
  /**
   * Deletes delivered events (and their attempts) delivered more than `retentionMs` ago, and previous secrets whose
   * grace has ended, in bounded chunks; resolves with the number of events deleted.
   */
  pruneWebhookEvents(retentionMs: number): Promise<number>;
}

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
