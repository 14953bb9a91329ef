import { setTimeout as sleep } from 'node:timers/promises';
import type Database from 'better-sqlite3';
import { DuplicateWebhookNameError, StorageUnavailableError, unavailableIf } from '../errors.js';
import { UNOBSERVED, type StorageObserver } from '../observer.js';
import { insertTokenOnce, keysetFrom, toStoredPlant, type PlantRow } from '../rows.js';
import {
  webhookEventId,
  webhookEventRowId,
  type ActiveWebhookSubscription,
  type ClaimedWebhookEvent,
  type CreateOutcome,
  type NewWebhookSubscription,
  type PlantQuery,
  type PlantToCreate,
  type RedeliverResult,
  type Store,
  type StorageIncident,
  type StoredPlant,
  type StoredToken,
  type TokenImportOutcome,
  type TokenInfo,
  type TokenRecord,
  type WebhookAttemptResult,
  type WebhookClaim,
  type WebhookDelivery,
  type WebhookImportOutcome,
  type WebhookRecord,
  type WebhookSubscriptionInfo,
} from '../store.js';
import { Incidents } from '../incidents.js';
import { CHECKPOINTER_DEFAULTS, Checkpointer, type CheckpointerOptions } from './checkpointer.js';
import { DatabaseFileIdentity } from './file-identity.js';
import { BUSY_TIMEOUT_MS, openConnection, unavailableKind } from './connection.js';
import { migrate } from './migrations.js';
import { prepareDatabaseFiles } from './private-files.js';
import { WEBHOOK_RECORD_COLUMNS, toWebhookRecord, type WebhookRecordRow } from './webhook-writer.js';
import { SqliteWriter, toTokenRecord, type TokenRecordRow } from './writer.js';

interface TokenRow {
  name: string;
  hash: Buffer;
}

interface TokenInfoRow {
  name: string;
  created_at: number;
  last_used_at: number | null;
}

/**
 * Deliberately small. Every page split (random ids split leaves all the time) leaves a temporary page number
 * past the end of the database in SQLite's page cache, and the next commit then scans the cache's whole hash
 * table to drop it: a cost per commit that grows with the cache, more than the extra page reads a smaller cache
 * causes (they come from the OS page cache). The sizes measured are in BENCHMARKS.md ("Random ids at 5 million rows").
 */
const WRITER_CACHE_MIB = 16;
const READER_CACHE_MIB = 16;

/** A readiness check should answer promptly, so its heartbeat waits for another connection's lock only this long. */
const HEARTBEAT_LOCK_WAIT_MS = 1000;
/** Retries for a lock held elsewhere start 1 ms apart and back off to this. */
const LOCK_RETRY_MAX_MS = 25;

/** The keyset list queries (`id >= from`), exported so test/indexes.test.ts checks the plans of these very texts. */
export const SQLITE_LIST_QUERIES = {
  listAll: 'SELECT id, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT ?',
  listByTag: 'SELECT id, name, tag FROM plants WHERE tag = ? AND id >= ? ORDER BY id LIMIT ?',
} as const;

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
function webhookReads(reader: Database.Database) {
  return {
    listWebhooks: reader.prepare<[], WebhookInfoRow>(
      `SELECT s.name, s.url, s.created_at, s.disabled_at, s.disabled_reason, s.last_success_at, s.last_failure_at, s.last_error,
              s.delivered_total, s.retried_total, s.failed_total,
              (SELECT count(*) FROM webhook_events e WHERE e.subscription_id = s.id AND e.next_attempt_at IS NOT NULL) AS waiting
       FROM webhook_subscriptions s ORDER BY s.name`,
    ),
    activeWebhooks: reader
      .prepare<[], ActiveWebhookRow>(
        'SELECT id, name, url, id_prefix, secret, previous_secret, previous_secret_until FROM webhook_subscriptions WHERE disabled_at IS NULL ORDER BY id',
      )
      .safeIntegers(true),
    webhookDeliveries: reader
      .prepare<{ name: string | null; failedOnly: number; limit: number }, DeliveryRow>(
        `SELECT a.event_id, s.name, s.id_prefix, e.plant_id, a.attempt, a.attempted_at, a.status, a.error
         FROM webhook_attempts a JOIN webhook_subscriptions s ON s.id = a.subscription_id JOIN webhook_events e ON e.id = a.event_id
         WHERE (@name IS NULL OR s.name = @name) AND (@failedOnly = 0 OR a.status IS NULL OR a.status NOT BETWEEN 200 AND 299)
         ORDER BY a.id DESC LIMIT @limit`,
      )
      .safeIntegers(true),
    countWaiting: reader
      .prepare<[], number>(
        `SELECT count(*) FROM webhook_events e JOIN webhook_subscriptions s ON s.id = e.subscription_id
         WHERE e.next_attempt_at IS NOT NULL AND s.disabled_at IS NULL`,
      )
      .pluck(),
  };
}

function translate(error: unknown): unknown {
  return unavailableIf(error, (cause) => unavailableKind(cause) !== undefined);
}

function isBusy(error: unknown): boolean {
  return String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY');
}

/**
 * SQLite in WAL mode with synchronous=FULL. Every write runs on the event loop, on one connection: a batch of
 * creates is one transaction and one fsync, and the loop waits for that fsync. That wait is cheaper than any
 * hand-off: requests arriving meanwhile queue in the kernel and make the next batch bigger, while a writer thread
 * sharing the core, or an fdatasync on the thread pool with the loop going on, made batches smaller and each create
 * dearer (measured in BENCHMARKS.md). A lock held by another process must not block the loop, so the write connection never waits
 * for a lock itself (busy timeout 0): a write that finds the lock taken is retried on a timer, up to the busy
 * timeout. Reads use a second connection, which WAL does not make wait for a writer; in the rare cases where a read
 * meets a lock (another connection rebuilding the WAL index after a process crashed mid-write) it is retried the same
 * way. Checkpoints run on a thread of their own (checkpointer-thread.ts), never inside a commit.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  /** One writer: SQLite commits one transaction at a time. */
  readonly writeConcurrency = 1;
  readonly #reader: Database.Database;
  readonly #writer: SqliteWriter;
  readonly #checkpointer: Checkpointer;
  readonly #incidents: Incidents;
  readonly #identity: DatabaseFileIdentity;
  readonly #statements;
  #closed = false;
  #observer: StorageObserver = UNOBSERVED;

  private constructor(
    reader: Database.Database,
    writer: SqliteWriter,
    checkpointer: Checkpointer,
    incidents: Incidents,
    identity: DatabaseFileIdentity,
  ) {
    this.#identity = identity;
    this.#reader = reader;
    this.#writer = writer;
    this.#checkpointer = checkpointer;
    this.#incidents = incidents;
    this.#statements = {
      getPlant: reader.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?').safeIntegers(true),
      listAll: reader.prepare<[bigint, number], PlantRow>(SQLITE_LIST_QUERIES.listAll).safeIntegers(true),
      listByTag: reader.prepare<[string, bigint, number], PlantRow>(SQLITE_LIST_QUERIES.listByTag).safeIntegers(true),
      listTokens: reader.prepare<[], TokenInfoRow>('SELECT name, created_at, last_used_at FROM tokens ORDER BY name'),
      findToken: reader.prepare<[Buffer], TokenRow>('SELECT name, hash FROM tokens WHERE hash = ?'),
      allTokens: reader.prepare<[], TokenRow>('SELECT name, hash FROM tokens'),
      // SQLite compares text bytewise (BINARY): the order PostgreSQL gives with COLLATE "C".
      exportTokens: reader.prepare<[], TokenRecordRow>('SELECT name, hash, created_at, last_used_at FROM tokens ORDER BY name'),
      exportWebhooks: reader.prepare<[], WebhookRecordRow>(`SELECT ${WEBHOOK_RECORD_COLUMNS} FROM webhook_subscriptions ORDER BY name`),
      ...webhookReads(reader),
    };
  }

  /** `options.checkpointer` exists for tests, which cannot wait the real restart delays out. */
  static open(file: string, options: { readonly checkpointer?: Partial<CheckpointerOptions> } = {}): SqliteStore {
    prepareDatabaseFiles(file);
    let reader: Database.Database | undefined;
    let writer: Database.Database | undefined;
    let checkpointer: Checkpointer | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      migrate(reader);
      writer = openConnection(file, WRITER_CACHE_MIB);
      // Opening and migrating may wait for another process (one migrating too); serving, no statement waits for a
      // lock on the event loop: #unlocked retries on a timer instead.
      for (const connection of [reader, writer]) connection.pragma('busy_timeout = 0');
      // Checkpoints run on their own thread, never inside a commit.
      writer.pragma('wal_autocheckpoint = 0');
      const sqliteWriter = new SqliteWriter(writer);
      const incidents = new Incidents();
      checkpointer = new Checkpointer(file, { ...CHECKPOINTER_DEFAULTS, ...options.checkpointer }, (incident) => incidents.report(incident));
      const identity = new DatabaseFileIdentity(file, (incident) => incidents.report(incident));
      return new SqliteStore(reader, sqliteWriter, checkpointer, incidents, identity);
    } catch (error) {
      void checkpointer?.stop();
      writer?.close();
      reader?.close();
      throw translate(error);
    }
  }

  /**
   * Runs `work` (one read, or one write that is a single durable commit) now or, while another connection holds a
   * lock it needs, again after a short wait, until `lockWaitMs` has passed; the event loop serves other requests
   * meanwhile. Neither connection ever waits for a lock itself (busy timeout 0), since that wait would block the loop.
   */
  async #unlocked<T>(work: () => T, lockWaitMs = BUSY_TIMEOUT_MS): Promise<T> {
    const deadline = performance.now() + lockWaitMs;
    for (let delay = 1; ; delay = Math.min(delay * 2, LOCK_RETRY_MAX_MS)) {
      if (this.#closed) {
        this.#observer.storageFailed('closed');
        throw new StorageUnavailableError('storage is closed');
      }
      try {
        return work();
      } catch (error) {
        if (!isBusy(error) || performance.now() + delay > deadline) {
          this.#observer.storageFailed(error instanceof StorageUnavailableError ? 'io' : (unavailableKind(error) ?? 'other'));
          throw translate(error);
        }
      }
      await sleep(delay);
    }
  }

  /**
   * A write (one durable commit) under #unlocked, made only while the database file at the path is the one open, and
   * acknowledged only if it still is once committed: a commit into a removed or replaced file would be lost.
   */
  #write<T>(work: () => T, lockWaitMs?: number): Promise<T> {
    return this.#unlocked(() => {
      this.#identity.assertSame();
      const result = work();
      this.#identity.assertSame();
      return result;
    }, lockWaitMs);
  }

  observe(observer: StorageObserver): void {
    this.#observer = observer;
  }

  createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]> {
    return this.#write(() => this.#writer.createPlants(plants));
  }

  getPlant(id: bigint): Promise<StoredPlant | undefined> {
    return this.#unlocked(() => {
      const row = this.#statements.getPlant.get(id);
      return row && toStoredPlant(row);
    });
  }

  listPlants(query: PlantQuery): Promise<StoredPlant[]> {
    const from = keysetFrom(query.after);
    if (from === undefined) return Promise.resolve([]);
    return this.#unlocked(() => {
      const rows =
        query.tag === undefined
          ? this.#statements.listAll.all(from, query.limit)
          : this.#statements.listByTag.all(query.tag, from, query.limit);
      return rows.map(toStoredPlant);
    });
  }

  deletePlant(id: bigint): Promise<boolean> {
    return this.#write(() => this.#writer.deletePlant(id));
  }

  /** Also refuses while the WAL cannot be checkpointed: writes would still succeed, but the WAL would grow without bound. */
  checkWritable(): Promise<void> {
    const problem = this.#checkpointer.problem;
    if (problem) return Promise.reject(new StorageUnavailableError(undefined, { cause: problem }));
    return this.#write(() => this.#writer.heartbeat(Date.now()), HEARTBEAT_LOCK_WAIT_MS);
  }

  addToken(name: string, hash: Buffer, createdAt: Date): Promise<void> {
    return insertTokenOnce(
      name,
      () => this.#write(() => this.#writer.addToken(name, hash, createdAt.getTime())),
      // The name is the primary key; a clash of hashes (never in practice) is not a naming mistake.
      (error) => (error as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY',
    );
  }

  listTokens(): Promise<TokenInfo[]> {
    return this.#unlocked(() =>
      this.#statements.listTokens.all().map((row) => ({
        name: row.name,
        createdAt: new Date(row.created_at),
        lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
      })),
    );
  }

  revokeToken(name: string): Promise<boolean> {
    return this.#write(() => this.#writer.revokeToken(name));
  }

  findToken(hash: Buffer): Promise<StoredToken | undefined> {
    return this.#unlocked(() => this.#statements.findToken.get(hash));
  }

  allTokens(): Promise<StoredToken[]> {
    return this.#unlocked(() => this.#statements.allTokens.all());
  }

  async recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    const entries = [...uses].map(([name, at]) => [name, at.getTime()] as const);
    await this.#write(() => this.#writer.recordTokenUse(entries));
  }

  async addWebhook(subscription: NewWebhookSubscription): Promise<void> {
    try {
      await this.#write(() => this.#writer.webhooks.add(subscription));
    } catch (error) {
      if ((error as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw new DuplicateWebhookNameError(subscription.name);
      throw error;
    }
  }

  listWebhooks(): Promise<WebhookSubscriptionInfo[]> {
    return this.#unlocked(() =>
      this.#statements.listWebhooks.all().map((row) => ({
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

  removeWebhook(name: string): Promise<boolean> {
    return this.#write(() => this.#writer.webhooks.remove(name));
  }

  setWebhookEnabled(name: string, enabled: boolean, reason: string): Promise<boolean> {
    return this.#write(() => this.#writer.webhooks.setEnabled(name, enabled, reason));
  }

  rotateWebhookSecret(name: string, secret: string, graceMs: number): Promise<boolean> {
    return this.#write(() => this.#writer.webhooks.rotateSecret(name, secret, graceMs));
  }

  webhookDeliveries(query: { readonly name?: string; readonly failedOnly: boolean; readonly limit: number }): Promise<WebhookDelivery[]> {
    return this.#unlocked(() =>
      this.#statements.webhookDeliveries.all({ name: query.name ?? null, failedOnly: query.failedOnly ? 1 : 0, limit: query.limit }).map((row) => ({
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

  async redeliverWebhookEvent(eventId: string): Promise<RedeliverResult> {
    const parsed = webhookEventRowId(eventId);
    if (!parsed) return 'not-found';
    const found = await this.#write(() => this.#writer.webhooks.redeliver(parsed.rowId, parsed.idPrefix));
    if (!found) return 'not-found';
    return found.disabled ? 'scheduled-disabled' : 'scheduled';
  }

  activeWebhooks(): Promise<ActiveWebhookSubscription[]> {
    return this.#unlocked(() => {
      const now = Date.now();
      return this.#statements.activeWebhooks.all().map((row) => ({
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

  settleAndClaimWebhookEvents(
    results: readonly WebhookAttemptResult[],
    claims: readonly WebhookClaim[],
    leaseMs: number,
  ): Promise<{ claimed: ClaimedWebhookEvent[]; disabled: Array<{ name: string; reason: string }> }> {
    return this.#write(() => this.#writer.webhooks.settleAndClaim(results, claims, leaseMs));
  }

  releaseWebhookLeases(): Promise<void> {
    return this.#write(() => this.#writer.webhooks.releaseLeases());
  }

  countWaitingWebhookEvents(): Promise<number> {
    return this.#unlocked(() => this.#statements.countWaiting.get() ?? 0);
  }

  async pruneWebhookEvents(retentionMs: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      // Short transactions, between which creates and reads go on.
      const chunk = await this.#write(() => this.#writer.webhooks.prune(Date.now() - retentionMs, PRUNE_CHUNK));
      deleted += chunk;
      if (chunk < PRUNE_CHUNK) return deleted;
      await sleep(0);
    }
  }

  onIncident(listener: (incident: StorageIncident) => void): () => void {
    return this.#incidents.listen(listener);
  }

  /** The thread checkpointing the WAL; for tests, which make it crash or fail. */
  get checkpointer(): Checkpointer {
    return this.#checkpointer;
  }

  exportTokens(): Promise<TokenRecord[]> {
    return this.#unlocked(() => this.#statements.exportTokens.all().map(toTokenRecord));
  }

  importTokens(tokens: readonly TokenRecord[]): Promise<TokenImportOutcome[]> {
    return this.#write(() => this.#writer.importTokens(tokens));
  }

  exportWebhooks(): Promise<WebhookRecord[]> {
    return this.#unlocked(() => this.#statements.exportWebhooks.all().map(toWebhookRecord));
  }

  importWebhooks(subscriptions: readonly WebhookRecord[]): Promise<WebhookImportOutcome[]> {
    return this.#write(() => this.#writer.webhooks.importAll(subscriptions));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#identity.stop();
    await this.#checkpointer.stop();
    this.#writer.close();
    if (this.#reader.open) this.#reader.close();
  }
}
