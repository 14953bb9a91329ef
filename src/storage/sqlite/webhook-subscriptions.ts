import { DuplicateWebhookNameError } from '../errors.js';
import { SQLITE_EXTENDED_CODES, prepare, prepareValue, prepareWrite, sqliteExtendedCode, transaction, type Connection, type Runners, type ReadRunner, type WriteRunner } from './connection.js';
import { WEBHOOK_RECORD_COLUMNS, toWebhookRecord, type WebhookRecordRowOf } from '../webhook-rows.js';
import { isSameWebhook, webhookEventId, webhookEventRowId } from '../webhook-store.js';
import type { DeliveriesQuery, NewWebhookSubscription, RedeliverResult, WebhookDelivery, WebhookSubscriptionStore } from '../webhook-store.js';
import type { WebhookImportOutcome, WebhookRecord, WebhookSubscriptionInfo } from '../webhook-store.js';

/** Times are milliseconds since the epoch. */
type WebhookRecordRow = WebhookRecordRowOf<number>;
const fromMs = (ms: number) => new Date(ms);

interface WebhookInfoRow {
  name: string;
  url: string;
  created_at: number;
  disabled_at: number | null;
  disabled_reason: string | null;
  last_success_at: number | null;
  last_failure_at: number | null;
  last_error: string | null;
  waiting: number;
  delivered_total: number;
  retried_total: number;
  failed_total: number;
}

interface DeliveryRow {
  event_id: bigint;
  name: string;
  id_prefix: string;
  plant_id: bigint;
  attempt: bigint;
  attempted_at: bigint;
  status: bigint | null;
  error: string | null;
}

function optionalDate(ms: number | null): Date | null {
  return ms === null ? null : new Date(ms);
}

/**
 * The webhook subscriptions of SQLite (`Store.webhookSubscriptions`), as the operator manages them (`plantstore
 * webhook …`) and `plantstore copy` moves them. Reads use the read connection; writes the one write connection, each a durable commit of its own that
 * takes the write lock at once or throws SQLITE_BUSY having changed nothing, which the runners retry.
 */
export class SqliteWebhookSubscriptions implements WebhookSubscriptionStore {
  readonly #read: ReadRunner;
  readonly #write: WriteRunner;
  readonly #reads;
  readonly #statements;
  /** Each of these is one transaction (transaction() in connection.ts). */
  readonly #remove: (name: string) => boolean;
  readonly #import: (subscriptions: readonly WebhookRecord[]) => WebhookImportOutcome[];

  /** `db` is the write connection. */
  constructor(reader: Connection, db: Connection, runners: Runners) {
    this.#read = runners.read;
    this.#write = runners.write;
    this.#reads = {
      // SQLite compares text bytewise (BINARY): the order PostgreSQL gives with COLLATE "C".
      exportAll: prepare<[], WebhookRecordRow>(reader, `SELECT ${WEBHOOK_RECORD_COLUMNS} FROM webhook_subscriptions ORDER BY name`),
      listWebhooks: prepare<[], WebhookInfoRow>(
        reader,
        `SELECT s.name, s.url, s.created_at, s.disabled_at, s.disabled_reason, s.last_success_at, s.last_failure_at, s.last_error,
                s.delivered_total, s.retried_total, s.failed_total,
                (SELECT count(*) FROM webhook_events e WHERE e.subscription_id = s.id AND e.next_attempt_at IS NOT NULL) AS waiting
         FROM webhook_subscriptions s ORDER BY s.name`,
      ),
      webhookDeliveries: prepare<[{ name: string | null; failedOnly: number; limit: number }], DeliveryRow>(
        reader,
        `SELECT a.event_id, s.name, s.id_prefix, e.plant_id, a.attempt, a.attempted_at, a.status, a.error
         FROM webhook_attempts a JOIN webhook_subscriptions s ON s.id = a.subscription_id JOIN webhook_events e ON e.id = a.event_id
         WHERE (@name IS NULL OR s.name = @name) AND (@failedOnly = 0 OR a.status IS NULL OR a.status NOT BETWEEN 200 AND 299)
         ORDER BY a.id DESC LIMIT @limit`,
        { bigInts: true },
      ),
    };
    this.#statements = {
      add: prepareWrite<[string, string, string, string, number]>(
        db,
        'INSERT INTO webhook_subscriptions (name, url, secret, id_prefix, created_at) VALUES (?, ?, ?, ?, ?)',
      ),
      subscriptionId: prepareValue<[string], bigint>(db, 'SELECT id FROM webhook_subscriptions WHERE name = ?', { bigInts: true }),
      deleteSubscription: prepareWrite<[bigint]>(db, 'DELETE FROM webhook_subscriptions WHERE id = ?'),
      deleteEventsOf: prepareWrite<[bigint]>(db, 'DELETE FROM webhook_events WHERE subscription_id = ?'),
      deleteAttemptsOf: prepareWrite<[bigint]>(db, 'DELETE FROM webhook_attempts WHERE subscription_id = ?'),
      enable: prepareWrite<[string]>(db, 'UPDATE webhook_subscriptions SET disabled_at = NULL, disabled_reason = NULL WHERE name = ?'),
      disable: prepareWrite<[number, string, string]>(
        db,
        'UPDATE webhook_subscriptions SET disabled_at = coalesce(disabled_at, ?), disabled_reason = ? WHERE name = ?',
      ),
      rotate: prepareWrite<[number, string, string]>(
        db,
        'UPDATE webhook_subscriptions SET previous_secret = secret, previous_secret_until = ?, secret = ? WHERE name = ?',
      ),
      redeliver: prepare<[number, bigint, string], { disabled: number }>(
        db,
        `UPDATE webhook_events SET next_attempt_at = ?, lease_until = NULL, retry_index = -1, delivered_at = NULL, failed_at = NULL
         WHERE id = ? AND subscription_id IN (SELECT id FROM webhook_subscriptions WHERE id_prefix = ?)
         RETURNING (SELECT disabled_at IS NOT NULL FROM webhook_subscriptions s WHERE s.id = subscription_id) AS disabled`,
      ),
      importSubscription: prepareWrite<[string, string, string, string | null, number | null, string, number, number | null, string | null]>(
        db,
        `INSERT INTO webhook_subscriptions (${WEBHOOK_RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
      ),
      storedSubscription: prepare<[string], WebhookRecordRow>(db, `SELECT ${WEBHOOK_RECORD_COLUMNS} FROM webhook_subscriptions WHERE name = ?`),
    };
    const s = this.#statements;
    this.#remove = (name) => transaction(db, () => {
      const id = s.subscriptionId.get(name);
      if (id === undefined) return false;
      s.deleteSubscription.run(id);
      s.deleteEventsOf.run(id);
      s.deleteAttemptsOf.run(id);
      return true;
    });
    this.#import = (subscriptions) => transaction(db, () =>
      subscriptions.map((record): WebhookImportOutcome => {
        const time = (date: Date | null) => date?.getTime() ?? null;
        const inserted = s.importSubscription.run(
          record.name,
          record.url,
          record.secret,
          record.previousSecret,
          time(record.previousSecretUntil),
          record.idPrefix,
          record.createdAt.getTime(),
          time(record.disabledAt),
          record.disabledReason,
        );
        if (inserted.changes === 1) return { kind: 'created' };
        const stored = s.storedSubscription.get(record.name) as WebhookRecordRow;
        return isSameWebhook(toWebhookRecord(stored, fromMs), record) ? { kind: 'replayed' } : { kind: 'conflict' };
      }),
    );
  }

  async add(subscription: NewWebhookSubscription): Promise<void> {
    const { name, url, secret, idPrefix, createdAt } = subscription;
    try {
      await this.#write(() => this.#statements.add.run(name, url, secret, idPrefix, createdAt.getTime()));
    } catch (error) {
      if (sqliteExtendedCode(error) === SQLITE_EXTENDED_CODES.CONSTRAINT_UNIQUE) throw new DuplicateWebhookNameError(name);
      throw error;
    }
  }

  list(): Promise<WebhookSubscriptionInfo[]> {
    return this.#read(() =>
      this.#reads.listWebhooks.all().map((row) => ({
        name: row.name,
        url: row.url,
        createdAt: new Date(row.created_at),
        disabledAt: optionalDate(row.disabled_at),
        disabledReason: row.disabled_reason,
        lastSuccessAt: optionalDate(row.last_success_at),
        lastFailureAt: optionalDate(row.last_failure_at),
        lastError: row.last_error,
        waiting: row.waiting,
        delivered: row.delivered_total,
        retried: row.retried_total,
        failed: row.failed_total,
      })),
    );
  }

  remove(name: string): Promise<boolean> {
    return this.#write(() => this.#remove(name));
  }

  setEnabled(name: string, enabled: boolean, reason: string): Promise<boolean> {
    return this.#write(() => (enabled ? this.#statements.enable.run(name) : this.#statements.disable.run(Date.now(), reason, name)).changes > 0);
  }

  rotateSecret(name: string, secret: string, graceMs: number): Promise<boolean> {
    return this.#write(() => this.#statements.rotate.run(Date.now() + graceMs, secret, name).changes > 0);
  }

  deliveries(query: DeliveriesQuery): Promise<WebhookDelivery[]> {
    return this.#read(() =>
      this.#reads.webhookDeliveries.all({ name: query.name ?? null, failedOnly: query.failedOnly ? 1 : 0, limit: query.limit }).map((row) => ({
        eventId: webhookEventId(row.id_prefix, row.event_id),
        subscription: row.name,
        plantId: row.plant_id,
        attempt: Number(row.attempt),
        attemptedAt: new Date(Number(row.attempted_at)),
        status: row.status === null ? null : Number(row.status),
        error: row.error,
      })),
    );
  }

  async redeliver(eventId: string): Promise<RedeliverResult> {
    const parsed = webhookEventRowId(eventId);
    if (!parsed) return 'not-found';
    const row = await this.#write(() => this.#statements.redeliver.get(Date.now(), parsed.rowId, parsed.idPrefix));
    if (!row) return 'not-found';
    return row.disabled === 1 ? 'scheduled-disabled' : 'scheduled';
  }

  exportAll(): Promise<WebhookRecord[]> {
    return this.#read(() => this.#reads.exportAll.all().map((row) => toWebhookRecord(row, fromMs)));
  }

  importAll(subscriptions: readonly WebhookRecord[]): Promise<WebhookImportOutcome[]> {
    return this.#write(() => this.#import(subscriptions));
  }
}
