import { setTimeout as sleep } from 'node:timers/promises';
import { prepare, prepareValue, prepareWrite, transaction, type Connection, type Runners, type ReadRunner, type WriteRunner } from './connection.js';
import type { CreateOutcome } from '../plant-store.js';
import type { Plant } from '../../plant.js';
import { toClaimedEvent, type ClaimedEventRowOf } from '../webhook-rows.js';
import { planSettlement } from '../webhook-settlement.js';
import type { ActiveWebhookSubscription, ClaimedWebhookEvent, SettledAndClaimed, WebhookAttemptResult, WebhookClaim, WebhookOutbox } from '../webhook-store.js';

/** Times are milliseconds since the epoch; a claim reads every integer as a bigint. */
type EventRow = ClaimedEventRowOf<bigint, bigint>;
const fromMs = (ms: bigint) => new Date(Number(ms));

/** Rows deleted per pruning transaction: short enough that creates waiting for the write lock never notice. */
const PRUNE_CHUNK = 1000;

interface ActiveWebhookRow {
  id: bigint;
  name: string;
  url: string;
  id_prefix: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: bigint | null;
}

/**
 * The webhook outbox of SQLite (`Store.webhookOutbox`): the events a batch of creates writes (`recordEvents`, inside
 * the transaction that stores the batch, so the outbox shares its commit and fsync) and what the dispatcher claims,
 * settles and prunes.
 * Reads use the read connection; writes the one write connection, each taking the write lock at once or throwing
 * SQLITE_BUSY having changed nothing (which the runners retry). `settleAndClaim`, the dispatcher's own bookkeeping,
 * is answered once durable, as every write is (docs/design/webhooks.md, "The dispatcher's records").
 */
export class SqliteWebhookOutbox implements WebhookOutbox {
  readonly #read: ReadRunner;
  readonly #write: WriteRunner;
  readonly #reads;
  readonly #statements;
  /** Each of these is one transaction (transaction() in connection.ts). */
  readonly #settleAndClaim: (results: readonly WebhookAttemptResult[], claims: readonly WebhookClaim[], leaseMs: number) => SettledAndClaimed;
  readonly #prune: (cutoff: number, now: number, chunk: number) => number;

  /** `db` is the write connection. */
  constructor(reader: Connection, db: Connection, runners: Runners) {
    this.#read = runners.read;
    this.#write = runners.write;
    this.#reads = {
      activeWebhooks: prepare<[], ActiveWebhookRow>(
        reader,
        'SELECT id, name, url, id_prefix, secret, previous_secret, previous_secret_until FROM webhook_subscriptions WHERE disabled_at IS NULL ORDER BY id',
        { bigInts: true },
      ),
      countWaiting: prepareValue<[], number>(
        reader,
        `SELECT count(*) FROM webhook_events e JOIN webhook_subscriptions s ON s.id = e.subscription_id
         WHERE e.next_attempt_at IS NOT NULL AND s.disabled_at IS NULL`,
      ),
    };
    this.#statements = {
      anyActive: prepareValue<[], number>(db, 'SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE disabled_at IS NULL)'),
      insertEvents: prepareWrite<[bigint, string, string | null, number, number, string | null]>(
        db,
        `INSERT INTO webhook_events (subscription_id, plant_id, name, tag, created_at, next_attempt_at, traceparent)
         SELECT id, ?, ?, ?, ?, ?, ? FROM webhook_subscriptions WHERE disabled_at IS NULL`,
      ),
      claim: prepare<[{ leaseUntil: number; subscription: bigint; now: number; limit: number }], EventRow>(
        db,
        `UPDATE webhook_events SET lease_until = @leaseUntil
         WHERE id IN (
           SELECT id FROM webhook_events
           WHERE subscription_id = @subscription AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now
             AND (lease_until IS NULL OR lease_until <= @now)
             AND @subscription IN (SELECT id FROM webhook_subscriptions WHERE disabled_at IS NULL)
           ORDER BY next_attempt_at LIMIT @limit)
         RETURNING id, subscription_id, plant_id, name, tag, created_at, attempts, retry_index, traceparent`,
        { bigInts: true },
      ),
      insertAttempt: prepareWrite<[bigint, bigint, number, number, number | null, string | null]>(
        db,
        'INSERT INTO webhook_attempts (event_id, subscription_id, attempt, attempted_at, status, error) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      delivered: prepareWrite<[number, bigint]>(
        db,
        `UPDATE webhook_events SET attempts = attempts + 1, next_attempt_at = NULL, lease_until = NULL, delivered_at = ?, failed_at = NULL
         WHERE id = ?`,
      ),
      retry: prepareWrite<[number, bigint]>(
        db,
        `UPDATE webhook_events SET attempts = attempts + 1, retry_index = retry_index + 1, next_attempt_at = ?, lease_until = NULL
         WHERE id = ?`,
      ),
      failed: prepareWrite<[number, bigint]>(
        db,
        'UPDATE webhook_events SET attempts = attempts + 1, next_attempt_at = NULL, lease_until = NULL, failed_at = ? WHERE id = ?',
      ),
      release: prepareWrite<[bigint]>(db, 'UPDATE webhook_events SET lease_until = NULL WHERE id = ?'),
      subscriptionDelivered: prepareWrite<[number, number, bigint]>(
        db,
        `UPDATE webhook_subscriptions SET last_success_at = max(coalesce(last_success_at, 0), ?), delivered_total = delivered_total + ?
         WHERE id = ?`,
      ),
      // The last failure moves only forward: an attempt that took long may be settled after a later one.
      subscriptionFailed: prepareWrite<[{ at: number; error: string | null; retried: number; failed: number; subscription: bigint }]>(
        db,
        `UPDATE webhook_subscriptions SET last_failure_at = max(coalesce(last_failure_at, @at), @at),
           last_error = CASE WHEN last_failure_at > @at THEN last_error ELSE @error END,
           retried_total = retried_total + @retried, failed_total = failed_total + @failed
         WHERE id = @subscription`,
      ),
      disableNow: prepare<[number, string, bigint], { name: string; disabled_reason: string }>(
        db,
        `UPDATE webhook_subscriptions SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL
         RETURNING name, disabled_reason`,
      ),
      disableIfNoSuccessSince: prepare<[number, string, bigint, number], { name: string; disabled_reason: string }>(
        db,
        `UPDATE webhook_subscriptions SET disabled_at = ?, disabled_reason = ?
         WHERE id = ? AND disabled_at IS NULL AND (last_success_at IS NULL OR last_success_at < ?)
         RETURNING name, disabled_reason`,
      ),
      releaseAll: prepareWrite<[]>(db, 'UPDATE webhook_events SET lease_until = NULL WHERE lease_until IS NOT NULL'),
      pruneAttempts: prepareWrite<[number, number]>(
        db,
        `DELETE FROM webhook_attempts WHERE event_id IN (
           SELECT id FROM webhook_events WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`,
      ),
      pruneEvents: prepareWrite<[number, number]>(
        db,
        `DELETE FROM webhook_events WHERE id IN (
           SELECT id FROM webhook_events WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`,
      ),
      pruneOrphans: prepareWrite<[number]>(
        db,
        `DELETE FROM webhook_events WHERE id IN (
           SELECT id FROM webhook_events
           WHERE next_attempt_at IS NOT NULL AND subscription_id NOT IN (SELECT id FROM webhook_subscriptions) LIMIT ?)`,
      ),
      forgetPreviousSecrets: prepareWrite<[number]>(
        db,
        'UPDATE webhook_subscriptions SET previous_secret = NULL, previous_secret_until = NULL WHERE previous_secret_until <= ?',
      ),
    };
    const s = this.#statements;
    this.#settleAndClaim = (results, claims, leaseMs) => transaction(db, () => {
      const now = Date.now();
      const plan = planSettlement(results);
      for (const eventId of plan.released) s.release.run(eventId);
      for (const { eventId, subscriptionId, attempt, attemptedAt, status, error, outcome, retryInMs } of plan.attempts) {
        const at = attemptedAt.getTime();
        s.insertAttempt.run(eventId, subscriptionId, attempt, at, status, error);
        if (outcome === 'delivered') s.delivered.run(at, eventId);
        else if (outcome === 'retry') s.retry.run(at + retryInMs, eventId);
        else s.failed.run(at, eventId);
      }
      for (const { subscriptionId, delivered, retried, failed, lastSuccessAt, lastFailureAt, lastError } of plan.tallies) {
        if (lastSuccessAt !== null) s.subscriptionDelivered.run(lastSuccessAt.getTime(), delivered, subscriptionId);
        if (lastFailureAt !== null) s.subscriptionFailed.run({ at: lastFailureAt.getTime(), error: lastError, retried, failed, subscription: subscriptionId });
      }
      const disabled: Array<{ name: string; reason: string }> = [];
      for (const { subscriptionId, at, reason, unlessSuccessSince } of plan.disables) {
        const row =
          unlessSuccessSince === null
            ? s.disableNow.get(at.getTime(), reason, subscriptionId)
            : s.disableIfNoSuccessSince.get(at.getTime(), reason, subscriptionId, unlessSuccessSince.getTime());
        if (row) disabled.push({ name: row.name, reason: row.disabled_reason });
      }
      const claimed: ClaimedWebhookEvent[] = [];
      for (const claim of claims) {
        for (const row of s.claim.all({ leaseUntil: now + leaseMs, subscription: claim.subscriptionId, now, limit: claim.limit })) {
          claimed.push(toClaimedEvent(row, fromMs, Number));
        }
      }
      return { claimed, disabled };
    });
    this.#prune = (cutoff, now, chunk) => transaction(db, () => {
      s.pruneAttempts.run(cutoff, chunk);
      const deleted = s.pruneEvents.run(cutoff, chunk).changes + s.pruneOrphans.run(chunk).changes;
      s.forgetPreviousSecrets.run(now);
      return deleted;
    });
  }

  /**
   * The outbox rows of a batch of creates: one event per created plant and active subscription. Called inside the
   * batch's transaction; with no active subscription it costs one indexed read per batch.
   */
  recordEvents(plants: readonly Plant[], outcomes: readonly CreateOutcome[], traceparents?: readonly (string | undefined)[]): void {
    if (this.#statements.anyActive.get() !== 1) return;
    const now = Date.now();
    outcomes.forEach((outcome, index) => {
      const plant = plants[index];
      if (outcome.kind === 'created' && plant) this.#statements.insertEvents.run(plant.id, plant.name, plant.tag, now, now, traceparents?.[index] ?? null);
    });
  }

  active(): Promise<ActiveWebhookSubscription[]> {
    return this.#read(() => {
      const now = Date.now();
      return this.#reads.activeWebhooks.all().map((row) => ({
        id: row.id,
        name: row.name,
        url: row.url,
        idPrefix: row.id_prefix,
        secrets:
          row.previous_secret !== null && row.previous_secret_until !== null && Number(row.previous_secret_until) > now
            ? [row.secret, row.previous_secret]
            : [row.secret],
      }));
    });
  }

  settleAndClaim(
    results: readonly WebhookAttemptResult[],
    claims: readonly WebhookClaim[],
    leaseMs: number,
  ): Promise<SettledAndClaimed> {
    // Like every write, answered once a WAL sync off the loop covers it, and so every create whose events it claims:
    // no event is sent for a plant that is not durable. The sync joins the creates' (one in flight at a time).
    return this.#write(() => this.#settleAndClaim(results, claims, leaseMs));
  }

  releaseLeases(): Promise<void> {
    return this.#write(() => {
      this.#statements.releaseAll.run();
    });
  }

  countWaiting(): Promise<number> {
    return this.#read(() => this.#reads.countWaiting.get() ?? 0);
  }

  async prune(retentionMs: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      // Short transactions, between which creates and reads go on.
      const chunk = await this.#write(() => this.#prune(Date.now() - retentionMs, Date.now(), PRUNE_CHUNK));
      deleted += chunk;
      if (chunk < PRUNE_CHUNK) return deleted;
      await sleep(0);
    }
  }
}
