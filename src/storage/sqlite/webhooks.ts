import { setTimeout as sleep } from 'node:timers/promises';
import { DuplicateWebhookNameError } from '../errors.js';
import { SQLITE_EXTENDED_CODES, prepare, prepareValue, prepareWrite, sqliteExtendedCode, transaction, type Connection, type Runners, type Unlocked, type WriteStatement } from './connection.js';
import type { CreateOutcome, Plant } from '../plant-store.js';
import { WEBHOOK_RECORD_COLUMNS, toClaimedEvent, toWebhookRecord, type ClaimedEventRowOf, type WebhookRecordRowOf } from '../webhook-rows.js';
import { planSettlement } from '../webhook-settlement.js';
import { isSameWebhook, webhookEventId, webhookEventRowId, type WebhookStore } from '../webhook-store.js';
import type { ActiveWebhookSubscription, ClaimedWebhookEvent, DeliveriesQuery, NewWebhookSubscription, RedeliverResult, SettledAndClaimed } from '../webhook-store.js';
import type { WebhookAttemptResult, WebhookClaim, WebhookDelivery, WebhookImportOutcome, WebhookRecord, WebhookSubscriptionInfo } from '../webhook-store.js';

/** Times are milliseconds since the epoch; a claim reads every integer as a bigint. */
type WebhookRecordRow = WebhookRecordRowOf<number>;
type EventRow = ClaimedEventRowOf<bigint, bigint>;
const fromMs = (ms: number | bigint) => new Date(Number(ms));

/** Rows deleted per pruning transaction: short enough that creates waiting for the write lock never notice. */
const PRUNE_CHUNK = 1000;

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

interface ActiveWebhookRow {
  id: bigint;
  name: string;
  url: string;
  id_prefix: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: bigint | null;
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

/** The webhook reads, on the read connection. */
function webhookReads(reader: Connection) {
  return {
    // SQLite compares text bytewise (BINARY): the order PostgreSQL gives with COLLATE "C".
    exportAll: prepare<[], WebhookRecordRow>(reader, `SELECT ${WEBHOOK_RECORD_COLUMNS} FROM webhook_subscriptions ORDER BY name`),
    listWebhooks: prepare<[], WebhookInfoRow>(
      reader,
      `SELECT s.name, s.url, s.created_at, s.disabled_at, s.disabled_reason, s.last_success_at, s.last_failure_at, s.last_error,
              s.delivered_total, s.retried_total, s.failed_total,
              (SELECT count(*) FROM webhook_events e WHERE e.subscription_id = s.id AND e.next_attempt_at IS NOT NULL) AS waiting
       FROM webhook_subscriptions s ORDER BY s.name`,
    ),
    activeWebhooks: prepare<[], ActiveWebhookRow>(
      reader,
      'SELECT id, name, url, id_prefix, secret, previous_secret, previous_secret_until FROM webhook_subscriptions WHERE disabled_at IS NULL ORDER BY id',
      { bigInts: true },
    ),
    webhookDeliveries: prepare<[{ name: string | null; failedOnly: number; limit: number }], DeliveryRow>(
      reader,
      `SELECT a.event_id, s.name, s.id_prefix, e.plant_id, a.attempt, a.attempted_at, a.status, a.error
       FROM webhook_attempts a JOIN webhook_subscriptions s ON s.id = a.subscription_id JOIN webhook_events e ON e.id = a.event_id
       WHERE (@name IS NULL OR s.name = @name) AND (@failedOnly = 0 OR a.status IS NULL OR a.status NOT BETWEEN 200 AND 299)
       ORDER BY a.id DESC LIMIT @limit`,
      { bigInts: true },
    ),
    countWaiting: prepareValue<[], number>(
      reader,
      `SELECT count(*) FROM webhook_events e JOIN webhook_subscriptions s ON s.id = e.subscription_id
       WHERE e.next_attempt_at IS NOT NULL AND s.disabled_at IS NULL`,
    ),
  };
}

/**
 * The webhook sub-store of SQLite. Reads use the read connection; writes the one write connection.
 * `recordEvents` runs inside the transaction that stores a batch of plants, so the outbox shares that batch's commit
 * and fsync; the other writes are durable commits of their own, each taking the write lock at once or throwing
 * SQLITE_BUSY having changed nothing (which `unlocked` retries), except `settleAndClaim`: the dispatcher's own
 * bookkeeping commits without an fsync of its own (docs/design.md, "The dispatcher's records").
 */
export class SqliteWebhooks implements WebhookStore {
  readonly #unlocked: Unlocked;
  readonly #write: Unlocked;
  readonly #reads;
  readonly #statements;
  /** Each of these is one transaction (transaction() in connection.ts). */
  readonly #settleAndClaim: (results: readonly WebhookAttemptResult[], claims: readonly WebhookClaim[], leaseMs: number) => SettledAndClaimed;
  readonly #syncNormal: WriteStatement<[]>;
  readonly #syncFull: WriteStatement<[]>;
  readonly #remove: (name: string) => boolean;
  readonly #prune: (cutoff: number, now: number, chunk: number) => number;
  readonly #import: (subscriptions: readonly WebhookRecord[]) => WebhookImportOutcome[];

  /** `db` is the write connection. */
  constructor(reader: Connection, db: Connection, runners: Runners) {
    this.#unlocked = runners.read;
    this.#write = runners.write;
    this.#reads = webhookReads(reader);
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
  recordEvents(plants: readonly Plant[], outcomes: readonly CreateOutcome[]): void {
    if (this.#statements.anyActive.get() !== 1) return;
    const now = Date.now();
    outcomes.forEach((outcome, index) => {
      const plant = plants[index];
      if (outcome.kind === 'created' && plant) this.#statements.insertEvents.run(plant.id, plant.name, plant.tag, now, now);
    });
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
    return this.#unlocked(() =>
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
    return this.#unlocked(() =>
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

  active(): Promise<ActiveWebhookSubscription[]> {
    return this.#unlocked(() => {
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
    return this.#write(() => {
      // Written to the WAL now (a SIGKILL keeps it), synced by the next durable commit or checkpoint: a power loss may
      // forget a settlement, and then the event is sent again with its webhook-id, which at-least-once allows. An fsync
      // here would stop the loop for every round of deliveries, creates included.
      this.#syncNormal.run();
      try {
        return this.#settleAndClaim(results, claims, leaseMs);
      } finally {
        this.#syncFull.run();
      }
    });
  }

  releaseLeases(): Promise<void> {
    return this.#write(() => {
      this.#statements.releaseAll.run();
    });
  }

  countWaiting(): Promise<number> {
    return this.#unlocked(() => this.#reads.countWaiting.get() ?? 0);
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

  exportAll(): Promise<WebhookRecord[]> {
    return this.#unlocked(() => this.#reads.exportAll.all().map((row) => toWebhookRecord(row, fromMs)));
  }

  importAll(subscriptions: readonly WebhookRecord[]): Promise<WebhookImportOutcome[]> {
    return this.#write(() => this.#import(subscriptions));
  }
}
