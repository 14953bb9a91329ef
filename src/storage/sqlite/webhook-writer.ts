import { prepare, prepareValue, prepareWrite, transaction, type Connection, type WriteStatement } from './connection.js';
import {
  isSameWebhook,
  type ClaimedWebhookEvent,
  CreateOutcome,
  type NewWebhookSubscription,
  type PlantToCreate,
  type WebhookAttemptResult,
  type WebhookClaim,
  type WebhookImportOutcome,
  type WebhookRecord,
} from '../store.js';

export interface WebhookRecordRow {
  name: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: number | null;
  id_prefix: string;
  created_at: number;
  disabled_at: number | null;
  disabled_reason: string | null;
}

export const WEBHOOK_RECORD_COLUMNS = 'name, url, secret, previous_secret, previous_secret_until, id_prefix, created_at, disabled_at, disabled_reason';

export function toWebhookRecord(row: WebhookRecordRow): WebhookRecord {
  const date = (ms: number | null) => (ms === null ? null : new Date(ms));
  return {
    name: row.name,
    url: row.url,
    secret: row.secret,
    previousSecret: row.previous_secret,
    previousSecretUntil: date(row.previous_secret_until),
    idPrefix: row.id_prefix,
    createdAt: new Date(row.created_at),
    disabledAt: date(row.disabled_at),
    disabledReason: row.disabled_reason,
  };
}

export interface EventRow {
  id: bigint;
  subscription_id: bigint;
  plant_id: bigint;
  name: string;
  tag: string | null;
  created_at: bigint;
  attempts: bigint;
  retry_index: bigint;
}

export function toClaimedEvent(row: EventRow): ClaimedWebhookEvent {
  return {
    id: row.id,
    subscriptionId: row.subscription_id,
    plant: { id: row.plant_id, name: row.name, tag: row.tag },
    createdAt: new Date(Number(row.created_at)),
    attempts: Number(row.attempts),
    retryIndex: Number(row.retry_index),
  };
}

/**
 * The webhook writes of the SQLite store, on its one write connection (SqliteWriter's). `recordEvents` runs inside
 * the transaction that stores a batch of plants, so the outbox shares that batch's commit and fsync; the others are
 * durable commits of their own, each taking the write lock at once or throwing SQLITE_BUSY having changed nothing,
 * except `settleAndClaim`: the dispatcher's own bookkeeping commits without an fsync of its own (docs/design.md,
 * "The dispatcher's records").
 */
export class SqliteWebhookWriter {
  readonly #statements;
  /** Each of these is one transaction (transaction() in connection.ts). */
  readonly #settleAndClaim: (
    results: readonly WebhookAttemptResult[],
    claims: readonly WebhookClaim[],
    leaseMs: number,
  ) => {
    claimed: ClaimedWebhookEvent[];
    disabled: Array<{ name: string; reason: string }>;
  };
  readonly #syncNormal: WriteStatement<[]>;
  readonly #syncFull: WriteStatement<[]>;
  readonly #remove: (name: string) => boolean;
  readonly #prune: (cutoff: number, now: number, chunk: number) => number;
  readonly #import: (subscriptions: readonly WebhookRecord[]) => WebhookImportOutcome[];

  constructor(db: Connection) {
    this.#syncNormal = prepareWrite<[]>(db, 'PRAGMA synchronous = NORMAL');
    this.#syncFull = prepareWrite<[]>(db, 'PRAGMA synchronous = FULL');
    this.#statements = {
      anyActive: prepareValue<[], number>(db, 'SELECT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE disabled_at IS NULL)'),
      insertEvents: prepareWrite<[bigint, string, string | null, number, number]>(
        db,
        `INSERT INTO webhook_events (subscription_id, plant_id, name, tag, created_at, next_attempt_at)
         SELECT id, ?, ?, ?, ?, ? FROM webhook_subscriptions WHERE disabled_at IS NULL`,
      ),
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
      claim: prepare<[{ leaseUntil: number; subscription: bigint; now: number; limit: number }], EventRow>(
        db,
        `UPDATE webhook_events SET lease_until = @leaseUntil
         WHERE id IN (
           SELECT id FROM webhook_events
           WHERE subscription_id = @subscription AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now
             AND (lease_until IS NULL OR lease_until <= @now)
             AND @subscription IN (SELECT id FROM webhook_subscriptions WHERE disabled_at IS NULL)
           ORDER BY next_attempt_at LIMIT @limit)
         RETURNING id, subscription_id, plant_id, name, tag, created_at, attempts, retry_index`,
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
      subscriptionFailed: prepareWrite<[number, string | null, number, number, bigint]>(
        db,
        `UPDATE webhook_subscriptions SET last_failure_at = ?, last_error = ?, retried_total = retried_total + ?, failed_total = failed_total + ?
         WHERE id = ?`,
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
      importSubscription: prepareWrite<[string, string, string, string | null, number | null, string, number, number | null, string | null]>(
        db,
        `INSERT INTO webhook_subscriptions (${WEBHOOK_RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
      ),
      storedSubscription: prepare<[string], WebhookRecordRow>(db, `SELECT ${WEBHOOK_RECORD_COLUMNS} FROM webhook_subscriptions WHERE name = ?`),
      forgetPreviousSecrets: prepareWrite<[number]>(
        db,
        'UPDATE webhook_subscriptions SET previous_secret = NULL, previous_secret_until = NULL WHERE previous_secret_until <= ?',
      ),
    };
    const s = this.#statements;
    this.#settleAndClaim = (results, claims, leaseMs) => transaction(db, () => {
      const now = Date.now();
      const disabled: Array<{ name: string; reason: string }> = [];
      const disable = (row: { name: string; disabled_reason: string } | undefined) => {
        if (row) disabled.push({ name: row.name, reason: row.disabled_reason });
      };
      // A subscription's success figures are written once per batch, not once per event: most results are deliveries.
      const deliveredBySubscription = new Map<bigint, { lastAt: number; count: number }>();
      for (const { event, attemptedAt, status, error, outcome } of results) {
        const at = attemptedAt.getTime();
        if (outcome.kind === 'released') {
          s.release.run(event.id);
          continue;
        }
        s.insertAttempt.run(event.id, event.subscriptionId, event.attempts + 1, at, status, error);
        switch (outcome.kind) {
          case 'delivered': {
            s.delivered.run(at, event.id);
            const delivered = deliveredBySubscription.get(event.subscriptionId);
            if (delivered === undefined) deliveredBySubscription.set(event.subscriptionId, { lastAt: at, count: 1 });
            else {
              delivered.lastAt = Math.max(delivered.lastAt, at);
              delivered.count += 1;
            }
            break;
          }
          case 'retry':
            s.retry.run(at + outcome.retryInMs, event.id);
            s.subscriptionFailed.run(at, error, 1, 0, event.subscriptionId);
            break;
          case 'failed':
            s.failed.run(at, event.id);
            s.subscriptionFailed.run(at, error, 0, 1, event.subscriptionId);
            break;
        }
      }
      for (const [subscriptionId, { lastAt, count }] of deliveredBySubscription) s.subscriptionDelivered.run(lastAt, count, subscriptionId);
      // After every success of this batch is recorded: a subscription is disabled for a spent schedule only if none
      // of its deliveries succeeded since the event was created.
      for (const { event, attemptedAt, outcome } of results) {
        if (outcome.kind === 'retry' && outcome.disable) disable(s.disableNow.get(attemptedAt.getTime(), outcome.disable, event.subscriptionId));
        if (outcome.kind === 'failed') {
          disable(s.disableIfNoSuccessSince.get(attemptedAt.getTime(), outcome.disableReason, event.subscriptionId, event.createdAt.getTime()));
        }
      }
      const claimed: ClaimedWebhookEvent[] = [];
      for (const claim of claims) {
        for (const row of s.claim.all({ leaseUntil: now + leaseMs, subscription: claim.subscriptionId, now, limit: claim.limit })) {
          claimed.push(toClaimedEvent(row));
        }
      }
      return { claimed, disabled };
    });
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
        if (inserted.changes === 1) return { status: 'created' };
        const stored = s.storedSubscription.get(record.name) as WebhookRecordRow;
        return isSameWebhook(toWebhookRecord(stored), record) ? { status: 'exists' } : { status: 'conflict' };
      }),
    );
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
  recordEvents(plants: readonly PlantToCreate[], outcomes: readonly CreateOutcome[]): void {
    if (this.#statements.anyActive.get() !== 1) return;
    const now = Date.now();
    outcomes.forEach((outcome, index) => {
      const plant = plants[index];
      if (outcome.status === 'created' && plant) this.#statements.insertEvents.run(plant.id, plant.name, plant.tag, now, now);
    });
  }

  /** Throws SQLITE_CONSTRAINT_UNIQUE when the name is taken. */
  add(subscription: NewWebhookSubscription): void {
    const { name, url, secret, idPrefix, createdAt } = subscription;
    this.#statements.add.run(name, url, secret, idPrefix, createdAt.getTime());
  }

  importAll(subscriptions: readonly WebhookRecord[]): WebhookImportOutcome[] {
    return this.#import(subscriptions);
  }

  remove(name: string): boolean {
    return this.#remove(name);
  }

  setEnabled(name: string, enabled: boolean, reason: string): boolean {
    return (enabled ? this.#statements.enable.run(name) : this.#statements.disable.run(Date.now(), reason, name)).changes > 0;
  }

  rotateSecret(name: string, secret: string, graceMs: number): boolean {
    return this.#statements.rotate.run(Date.now() + graceMs, secret, name).changes > 0;
  }

  /** undefined when no event of a subscription with that prefix has that id; otherwise whether its subscription is disabled. */
  redeliver(rowId: bigint, idPrefix: string): { disabled: boolean } | undefined {
    const row = this.#statements.redeliver.get(Date.now(), rowId, idPrefix) as { disabled: number } | undefined;
    return row && { disabled: row.disabled === 1 };
  }

  settleAndClaim(
    results: readonly WebhookAttemptResult[],
    claims: readonly WebhookClaim[],
    leaseMs: number,
  ): { claimed: ClaimedWebhookEvent[]; disabled: Array<{ name: string; reason: string }> } {
    // Written to the WAL now (a SIGKILL keeps it), synced by the next durable commit or checkpoint: a power loss may
    // forget a settlement, and then the event is sent again with its webhook-id, which at-least-once allows. An fsync
    // here would stop the loop for every round of deliveries, creates included.
    this.#syncNormal.run();
    try {
      return this.#settleAndClaim(results, claims, leaseMs);
    } finally {
      this.#syncFull.run();
    }
  }

  releaseLeases(): void {
    this.#statements.releaseAll.run();
  }

  /** One chunk of pruning (a short transaction); the caller repeats while it deletes a whole chunk. */
  prune(cutoff: number, chunk: number): number {
    return this.#prune(cutoff, Date.now(), chunk);
  }
}
