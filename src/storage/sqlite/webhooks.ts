import type { Connection, Runners } from './connection.js';
import type { CreateOutcome } from '../plant-store.js';
import type { Plant } from '../../plants/plant.js';
import { SqliteWebhookOutbox } from './webhook-outbox.js';
import { SqliteWebhookSubscriptions } from './webhook-subscriptions.js';
import type { ActiveWebhookSubscription, DeliveriesQuery, NewWebhookSubscription, RedeliverResult, SettledAndClaimed, WebhookStore } from '../webhook-store.js';
import type { WebhookAttemptResult, WebhookClaim, WebhookDelivery, WebhookImportOutcome, WebhookRecord, WebhookSubscriptionInfo } from '../webhook-store.js';

/**
 * The webhook sub-store of SQLite, on the store's two connections: the subscriptions the operator manages and
 * `plantstore copy` moves (./webhook-subscriptions.ts), and the outbox that creates write and the dispatcher delivers
 * (./webhook-outbox.ts). Each half is one slice of WebhookStore; this class only puts them together.
 */
export class SqliteWebhooks implements WebhookStore {
  readonly #subscriptions: SqliteWebhookSubscriptions;
  readonly #outbox: SqliteWebhookOutbox;

  /** `db` is the write connection. */
  constructor(reader: Connection, db: Connection, runners: Runners) {
    this.#subscriptions = new SqliteWebhookSubscriptions(reader, db, runners);
    this.#outbox = new SqliteWebhookOutbox(reader, db, runners);
  }

  /** Called inside the transaction that stores a batch of plants (SqlitePlants.create): see SqliteWebhookOutbox. */
  recordEvents(plants: readonly Plant[], outcomes: readonly CreateOutcome[], traceparents?: readonly (string | undefined)[]): void {
    this.#outbox.recordEvents(plants, outcomes, traceparents);
  }

  add(subscription: NewWebhookSubscription): Promise<void> {
    return this.#subscriptions.add(subscription);
  }

  list(): Promise<WebhookSubscriptionInfo[]> {
    return this.#subscriptions.list();
  }

  remove(name: string): Promise<boolean> {
    return this.#subscriptions.remove(name);
  }

  setEnabled(name: string, enabled: boolean, reason: string): Promise<boolean> {
    return this.#subscriptions.setEnabled(name, enabled, reason);
  }

  rotateSecret(name: string, secret: string, graceMs: number): Promise<boolean> {
    return this.#subscriptions.rotateSecret(name, secret, graceMs);
  }

  deliveries(query: DeliveriesQuery): Promise<WebhookDelivery[]> {
    return this.#subscriptions.deliveries(query);
  }

  redeliver(eventId: string): Promise<RedeliverResult> {
    return this.#subscriptions.redeliver(eventId);
  }

  exportAll(): Promise<WebhookRecord[]> {
    return this.#subscriptions.exportAll();
  }

  importAll(subscriptions: readonly WebhookRecord[]): Promise<WebhookImportOutcome[]> {
    return this.#subscriptions.importAll(subscriptions);
  }

  active(): Promise<ActiveWebhookSubscription[]> {
    return this.#outbox.active();
  }

  settleAndClaim(results: readonly WebhookAttemptResult[], claims: readonly WebhookClaim[], leaseMs: number): Promise<SettledAndClaimed> {
    return this.#outbox.settleAndClaim(results, claims, leaseMs);
  }

  releaseLeases(): Promise<void> {
    return this.#outbox.releaseLeases();
  }

  countWaiting(): Promise<number> {
    return this.#outbox.countWaiting();
  }

  prune(retentionMs: number): Promise<number> {
    return this.#outbox.prune(retentionMs);
  }
}
