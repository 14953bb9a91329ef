import { toClaimedEvent, type ClaimedEventRowOf } from '../webhook-rows.js';
import { planSettlement } from '../webhook-settlement.js';
import type { ActiveWebhookSubscription, ClaimedWebhookEvent, SettledAndClaimed, WebhookAttemptResult, WebhookClaim, WebhookOutbox } from '../webhook-store.js';
import type { Query, Transaction } from './connection.js';

/** pg gives times as Dates and int4 as numbers: rows map as they come. */
type EventRow = ClaimedEventRowOf<Date, number>;
const asIs = <T>(value: T) => value;

const EVENT_COLUMNS = 'e.id, e.subscription_id, e.plant_id, e.name, e.tag, e.created_at, e.attempts, e.retry_index, e.traceparent';

/** Rows deleted per pruning statement: short enough that nothing waits on them for long. */
const PRUNE_CHUNK = 1000;

/**
 * Claims due events of one subscription: SKIP LOCKED so that replicas claiming at once take different rows without
 * waiting for each other, and a lease (lease_until) so that once committed no other replica takes them until they
 * are settled or the lease runs out. Times are the database's (now()), so replicas' clocks need not agree.
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

/**
 * The webhook outbox of PostgreSQL (`Store.webhookOutbox`): what the dispatcher claims, settles and prunes. Its events
 * are written by the plant store's insert statement (./plants.ts). Every statement goes through the store's pool and
 * its error translation.
 */
export class PostgresWebhookOutbox implements WebhookOutbox {
  readonly #query: Query;
  readonly #transaction: Transaction;

  constructor(query: Query, transaction: Transaction) {
    this.#query = query;
    this.#transaction = transaction;
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

  /** Another replica may hold leases: they are left to run out. */
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
