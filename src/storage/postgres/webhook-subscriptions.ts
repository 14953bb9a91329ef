import { DuplicateWebhookNameError } from '../errors.js';
import { WEBHOOK_RECORD_COLUMNS, toWebhookRecord, type WebhookRecordRowOf } from '../webhook-rows.js';
import { isSameWebhook, webhookEventId, webhookEventRowId } from '../webhook-store.js';
import type { DeliveriesQuery, NewWebhookSubscription, RedeliverResult, WebhookDelivery, WebhookSubscriptionStore } from '../webhook-store.js';
import type { WebhookImportOutcome, WebhookRecord, WebhookSubscriptionInfo } from '../webhook-store.js';
import type { Query, Transaction } from './connection.js';

/** pg gives times as Dates: rows map as they come. */
type WebhookRecordRow = WebhookRecordRowOf<Date>;
const asIs = <T>(value: T) => value;

/**
 * The webhook subscriptions of PostgreSQL (`Store.webhookSubscriptions`), as the operator manages them (`plantstore
 * webhook …`) and `plantstore copy` moves them; every statement goes through the store's pool and its error
 * translation.
 */
export class PostgresWebhookSubscriptions implements WebhookSubscriptionStore {
  readonly #query: Query;
  readonly #transaction: Transaction;

  constructor(query: Query, transaction: Transaction) {
    this.#query = query;
    this.#transaction = transaction;
  }

  async add(subscription: NewWebhookSubscription): Promise<void> {
    const { name, url, secret, idPrefix, createdAt } = subscription;
    try {
      await this.#query('INSERT INTO webhook_subscriptions (name, url, secret, id_prefix, created_at) VALUES ($1, $2, $3, $4, $5)', [
        name,
        url,
        secret,
        idPrefix,
        createdAt,
      ]);
    } catch (error) {
      const { code, constraint } = error as { code?: unknown; constraint?: unknown };
      if (code === '23505' && constraint === 'webhook_subscriptions_name_key') throw new DuplicateWebhookNameError(name);
      throw error;
    }
  }

  async list(): Promise<WebhookSubscriptionInfo[]> {
    const result = await this.#query<{
      name: string;
      url: string;
      created_at: Date;
      disabled_at: Date | null;
      disabled_reason: string | null;
      last_success_at: Date | null;
      last_failure_at: Date | null;
      last_error: string | null;
      waiting: bigint;
      delivered_total: bigint;
      retried_total: bigint;
      failed_total: bigint;
    }>(
      `SELECT s.name, s.url, s.created_at, s.disabled_at, s.disabled_reason, s.last_success_at, s.last_failure_at, s.last_error,
              s.delivered_total, s.retried_total, s.failed_total,
              (SELECT count(*) FROM webhook_events e WHERE e.subscription_id = s.id AND e.next_attempt_at IS NOT NULL) AS waiting
       FROM webhook_subscriptions s ORDER BY s.name`,
    );
    return result.rows.map((row) => ({
      name: row.name,
      url: row.url,
      createdAt: row.created_at,
      disabledAt: row.disabled_at,
      disabledReason: row.disabled_reason,
      lastSuccessAt: row.last_success_at,
      lastFailureAt: row.last_failure_at,
      lastError: row.last_error,
      waiting: Number(row.waiting),
      delivered: Number(row.delivered_total),
      retried: Number(row.retried_total),
      failed: Number(row.failed_total),
    }));
  }

  /** By name in byte order (COLLATE "C"), the order SQLite gives: the database's collation may differ. */
  async exportAll(): Promise<WebhookRecord[]> {
    const result = await this.#query<WebhookRecordRow>(`SELECT ${WEBHOOK_RECORD_COLUMNS} FROM webhook_subscriptions ORDER BY name COLLATE "C"`);
    return result.rows.map((row) => toWebhookRecord(row, asIs));
  }

  async importAll(subscriptions: readonly WebhookRecord[]): Promise<WebhookImportOutcome[]> {
    if (subscriptions.length === 0) return [];
    return this.#transaction(async (query) => {
      const outcomes: WebhookImportOutcome[] = [];
      for (const record of subscriptions) {
        const inserted = await query(
          `INSERT INTO webhook_subscriptions (${WEBHOOK_RECORD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (name) DO NOTHING`,
          [
            record.name,
            record.url,
            record.secret,
            record.previousSecret,
            record.previousSecretUntil,
            record.idPrefix,
            record.createdAt,
            record.disabledAt,
            record.disabledReason,
          ],
        );
        if (inserted.rowCount === 1) {
          outcomes.push({ kind: 'created' });
          continue;
        }
        const stored = (await query<WebhookRecordRow>(`SELECT ${WEBHOOK_RECORD_COLUMNS} FROM webhook_subscriptions WHERE name = $1`, [record.name]))
          .rows[0] as WebhookRecordRow;
        outcomes.push(isSameWebhook(toWebhookRecord(stored, asIs), record) ? { kind: 'replayed' } : { kind: 'conflict' });
      }
      return outcomes;
    });
  }

  remove(name: string): Promise<boolean> {
    return this.#transaction(async (query) => {
      const removed = await query<{ id: bigint }>('DELETE FROM webhook_subscriptions WHERE name = $1 RETURNING id', [name]);
      const id = removed.rows[0]?.id;
      if (id === undefined) return false;
      await query('DELETE FROM webhook_events WHERE subscription_id = $1', [id.toString()]);
      await query('DELETE FROM webhook_attempts WHERE subscription_id = $1', [id.toString()]);
      return true;
    });
  }

  async setEnabled(name: string, enabled: boolean, reason: string): Promise<boolean> {
    const result = enabled
      ? await this.#query('UPDATE webhook_subscriptions SET disabled_at = NULL, disabled_reason = NULL WHERE name = $1', [name])
      : await this.#query('UPDATE webhook_subscriptions SET disabled_at = coalesce(disabled_at, now()), disabled_reason = $2 WHERE name = $1', [
          name,
          reason,
        ]);
    return (result.rowCount ?? 0) > 0;
  }

  async rotateSecret(name: string, secret: string, graceMs: number): Promise<boolean> {
    const result = await this.#query(
      `UPDATE webhook_subscriptions SET previous_secret = secret, previous_secret_until = now() + $3 * interval '1 millisecond', secret = $2
       WHERE name = $1`,
      [name, secret, graceMs],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async deliveries(query: DeliveriesQuery): Promise<WebhookDelivery[]> {
    const result = await this.#query<{
      event_id: bigint;
      name: string;
      id_prefix: string;
      plant_id: bigint;
      attempt: number;
      attempted_at: Date;
      status: number | null;
      error: string | null;
    }>(
      `SELECT a.event_id, s.name, s.id_prefix, e.plant_id, a.attempt, a.attempted_at, a.status, a.error
       FROM webhook_attempts a JOIN webhook_subscriptions s ON s.id = a.subscription_id JOIN webhook_events e ON e.id = a.event_id
       WHERE ($1::text IS NULL OR s.name = $1) AND (NOT $2 OR a.status IS NULL OR a.status NOT BETWEEN 200 AND 299)
       ORDER BY a.id DESC LIMIT $3`,
      [query.name ?? null, query.failedOnly, query.limit],
    );
    return result.rows.map((row) => ({
      eventId: webhookEventId(row.id_prefix, row.event_id),
      subscription: row.name,
      plantId: row.plant_id,
      attempt: row.attempt,
      attemptedAt: row.attempted_at,
      status: row.status,
      error: row.error,
    }));
  }

  async redeliver(eventId: string): Promise<RedeliverResult> {
    const parsed = webhookEventRowId(eventId);
    if (!parsed) return 'not-found';
    const result = await this.#query<{ disabled: boolean }>(
      `UPDATE webhook_events e SET next_attempt_at = now(), lease_until = NULL, retry_index = -1, delivered_at = NULL, failed_at = NULL
       FROM webhook_subscriptions s
       WHERE e.id = $1 AND s.id = e.subscription_id AND s.id_prefix = $2
       RETURNING s.disabled_at IS NOT NULL AS disabled`,
      [parsed.rowId.toString(), parsed.idPrefix],
    );
    const row = result.rows[0];
    if (!row) return 'not-found';
    return row.disabled ? 'scheduled-disabled' : 'scheduled';
  }
}
