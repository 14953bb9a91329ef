import { DuplicateWebhookNameError } from '../errors.js';
import { WEBHOOK_RECORD_COLUMNS, toClaimedEvent, toWebhookRecord, type ClaimedEventRowOf, type WebhookRecordRowOf } from '../webhook-rows.js';
import { planSettlement } from '../webhook-settlement.js';
import { isSameWebhook, webhookEventId, webhookEventRowId, type WebhookStore } from '../webhook-store.js';
import type { ActiveWebhookSubscription, ClaimedWebhookEvent, DeliveriesQuery, NewWebhookSubscription, RedeliverResult, SettledAndClaimed } from '../webhook-store.js';
import type { WebhookAttemptResult, WebhookClaim, WebhookDelivery, WebhookImportOutcome, WebhookRecord, WebhookSubscriptionInfo } from '../webhook-store.js';
import type { Query, Transaction } from './connection.js';

/** pg gives times as Dates and int4 as numbers: rows map as they come. */
type WebhookRecordRow = WebhookRecordRowOf<Date>;
type EventRow = ClaimedEventRowOf<Date, number>;
const asIs = <T>(value: T) => value;


const EVENT_COLUMNS = 'e.id, e.subscription_id, e.plant_id, e.name, e.tag, e.created_at, e.attempts, e.retry_index, e.traceparent';

/** Rows deleted per pruning statement: short enough that nothing waits on them for long. */
const PRUNE_CHUNK = 1000;

/**
 * Claims due events of one subscription: SKIP LOCKED so that instances claiming at once take different rows without
 * waiting for each other, and a lease (lease_until) so that once committed no other instance takes them until they
 * are settled or the lease runs out. Times are the database's (now()), so instances' clocks need not agree.
 */
const CLAIM = `UPDATE webhook_events e SET lease_until = now() + $3 * interval '1 millisecond'
  FROM (
    SELECT id FROM webhook_events
    WHERE subscription_id = $1 AND next_attempt_at IS NOT NULL AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until <= now())
      AND EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = $1 AND disabled_at IS NULL)
    ORDER BY next_attempt_at LIMIT $2
    FOR UPDATE SKIP LOCKED
  ) c
  WHERE e.id = c.id
  RETURNING ${EVENT_COLUMNS}`;

/** The webhook sub-store of PostgreSQL; every statement goes through the store's pool and its error translation. */
export class PostgresWebhooks implements WebhookStore {
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

  async active(): Promise<ActiveWebhookSubscription[]> {
    const result = await this.#query<{ id: bigint; name: string; url: string; id_prefix: string; secret: string; previous_secret: string | null }>(
      `SELECT id, name, url, id_prefix, secret, CASE WHEN previous_secret_until > now() THEN previous_secret END AS previous_secret
       FROM webhook_subscriptions WHERE disabled_at IS NULL ORDER BY id`,
    );
    return result.rows.map((row) => ({
      id: row.id,
      name: row.name,
      url: row.url,
      idPrefix: row.id_prefix,
      secrets: row.previous_secret === null ? [row.secret] : [row.secret, row.previous_secret],
    }));
  }

  settleAndClaim(
    results: readonly WebhookAttemptResult[],
    claims: readonly WebhookClaim[],
    leaseMs: number,
  ): Promise<SettledAndClaimed> {
    return this.#transaction(async (query) => {
      const disabled = results.length > 0 ? await settle(query, results) : [];
      const claimed: ClaimedWebhookEvent[] = [];
      for (const claim of claims) {
        const rows = await query<EventRow>(CLAIM, [claim.subscriptionId.toString(), claim.limit, leaseMs]);
        for (const row of rows.rows) claimed.push(toClaimedEvent(row, asIs, asIs));
      }
      return { claimed, disabled };
    });
  }

  /** Another instance may hold leases: they are left to run out. */
  async releaseLeases(): Promise<void> {}

  async countWaiting(): Promise<number> {
    const result = await this.#query<{ waiting: bigint }>(
      `SELECT count(*) AS waiting FROM webhook_events e JOIN webhook_subscriptions s ON s.id = e.subscription_id
       WHERE e.next_attempt_at IS NOT NULL AND s.disabled_at IS NULL`,
    );
    return Number(result.rows[0]?.waiting ?? 0);
  }

  async prune(retentionMs: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      const result = await this.#query<{ deleted: number }>(
        `WITH gone AS (
           DELETE FROM webhook_events WHERE id IN (
             SELECT id FROM webhook_events WHERE delivered_at IS NOT NULL AND delivered_at < now() - $1 * interval '1 millisecond'
             ORDER BY delivered_at LIMIT $2)
           RETURNING id
         ), attempts AS (DELETE FROM webhook_attempts WHERE event_id IN (SELECT id FROM gone))
         SELECT count(*)::int AS deleted FROM gone`,
        [retentionMs, PRUNE_CHUNK],
      );
      const chunk = result.rows[0]?.deleted ?? 0;
      deleted += chunk;
      if (chunk < PRUNE_CHUNK) break;
    }
    // Events written for a subscription removed at that moment (no foreign key holds them back): never claimed, never
    // counted, removed here. Only waiting events can be such, so the walk stays on the small index of waiting events.
    const orphans = await this.#query(
      `DELETE FROM webhook_events e WHERE e.next_attempt_at IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = e.subscription_id)`,
    );
    await this.#query('UPDATE webhook_subscriptions SET previous_secret = NULL, previous_secret_until = NULL WHERE previous_secret_until <= now()');
    return deleted + (orphans.rowCount ?? 0);
  }
}

/** Records a round of attempt results in at most four statements, whatever their number; resolves with the disables. */
async function settle(query: Query, results: readonly WebhookAttemptResult[]): Promise<Array<{ name: string; reason: string }>> {
  const { released, attempts, tallies, disables } = planSettlement(results);
  if (attempts.length > 0) {
    await query(
      `INSERT INTO webhook_attempts (event_id, subscription_id, attempt, attempted_at, status, error)
       SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::timestamptz[], $5::int[], $6::text[])`,
      [
        attempts.map((a) => a.eventId.toString()),
        attempts.map((a) => a.subscriptionId.toString()),
        attempts.map((a) => a.attempt),
        attempts.map((a) => a.attemptedAt),
        attempts.map((a) => a.status),
        attempts.map((a) => a.error),
      ],
    );
  }
  await query(
    `UPDATE webhook_events e SET
       attempts = e.attempts + CASE WHEN r.kind = 'released' THEN 0 ELSE 1 END,
       retry_index = e.retry_index + CASE WHEN r.kind = 'retry' THEN 1 ELSE 0 END,
       next_attempt_at = CASE r.kind WHEN 'retry' THEN now() + r.retry_ms * interval '1 millisecond' WHEN 'released' THEN e.next_attempt_at END,
       lease_until = NULL,
       delivered_at = CASE WHEN r.kind = 'delivered' THEN r.at ELSE e.delivered_at END,
       failed_at = CASE r.kind WHEN 'failed' THEN r.at WHEN 'delivered' THEN NULL ELSE e.failed_at END
     FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::bigint[]) AS r(id, kind, at, retry_ms)
     WHERE e.id = r.id`,
    [
      [...attempts.map((a) => a.eventId.toString()), ...released.map((id) => id.toString())],
      [...attempts.map((a) => a.outcome), ...released.map(() => 'released')],
      [...attempts.map((a) => a.attemptedAt), ...released.map(() => null)],
      [...attempts.map((a) => a.retryInMs), ...released.map(() => 0)],
    ],
  );
  if (tallies.length > 0) {
    // The last failure moves only forward: an attempt that took long may be settled after a later one.
    await query(
      `UPDATE webhook_subscriptions s SET
         delivered_total = s.delivered_total + r.delivered, retried_total = s.retried_total + r.retried, failed_total = s.failed_total + r.failed,
         last_success_at = greatest(s.last_success_at, r.last_success),
         last_failure_at = greatest(s.last_failure_at, r.last_failure),
         last_error = CASE WHEN r.last_failure IS NULL OR s.last_failure_at > r.last_failure THEN s.last_error ELSE r.last_error END
       FROM unnest($1::bigint[], $2::int[], $3::int[], $4::int[], $5::timestamptz[], $6::timestamptz[], $7::text[])
         AS r(id, delivered, retried, failed, last_success, last_failure, last_error)
       WHERE s.id = r.id`,
      [
        tallies.map((t) => t.subscriptionId.toString()),
        tallies.map((t) => t.delivered),
        tallies.map((t) => t.retried),
        tallies.map((t) => t.failed),
        tallies.map((t) => t.lastSuccessAt),
        tallies.map((t) => t.lastFailureAt),
        tallies.map((t) => t.lastError),
      ],
    );
  }
  if (disables.length === 0) return [];
  const disabled = await query<{ name: string; disabled_reason: string }>(
    `UPDATE webhook_subscriptions s SET disabled_at = r.at, disabled_reason = r.reason
     FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::timestamptz[]) AS r(id, at, reason, unless_success_since)
     WHERE s.id = r.id AND s.disabled_at IS NULL
       AND (r.unless_success_since IS NULL OR s.last_success_at IS NULL OR s.last_success_at < r.unless_success_since)
     RETURNING s.name, s.disabled_reason`,
    [disables.map((d) => d.subscriptionId.toString()), disables.map((d) => d.at), disables.map((d) => d.reason), disables.map((d) => d.unlessSuccessSince)],
  );
  return disabled.rows.map((row) => ({ name: row.name, reason: row.disabled_reason }));
}
