import pg from 'pg';
import { UNOBSERVED, type QueryTracer, type StorageObserver } from '../observer.js';
import type { ConnectionPoolState, Store, StorageIncident } from '../store.js';
import {
  POSTGRES_TIMEOUTS,
  connectionConfig,
  poolConfig,
  statement,
  translate,
  unavailableKind,
  type PostgresConfig,
  type PostgresTimeouts,
  type Query,
  type Transaction,
} from './connection.js';
import { migrate } from './migrations.js';
import { PostgresChanges } from './changes.js';
import { PostgresPlants } from './plants.js';
import { PostgresTokens } from './tokens.js';
import { PostgresWebhookOutbox } from './webhook-outbox.js';
import { PostgresWebhookSubscriptions } from './webhook-subscriptions.js';

/**
 * PostgreSQL through a pg pool. Uniqueness, replays and conflicts are decided by the database, so they hold across
 * any number of replicas (plantstore servers on the one database); a create is answered only after its transaction commits (synchronous_commit on).
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres';
  /**
   * A few batches commit at once, each on its own connection, leaving at least one connection of the pool for reads
   * and tokens; more than four buys nothing, since every batch waits for the same WAL flush.
   */
  readonly writeConcurrency: number;
  readonly #pool: pg.Pool;
  #observer: StorageObserver = UNOBSERVED;
  #tracer: QueryTracer | undefined;
  /** Plants, tokens, webhook subscriptions and their outbox, each on this store's pool and its error translation. */
  readonly plants: PostgresPlants;
  readonly tokens: PostgresTokens;
  readonly webhookSubscriptions: PostgresWebhookSubscriptions;
  readonly webhookOutbox: PostgresWebhookOutbox;
  readonly changes: PostgresChanges;

  private constructor(pool: pg.Pool, config: PostgresConfig, timeouts: PostgresTimeouts) {
    const poolSize = config.poolSize;
    this.#pool = pool;
    this.writeConcurrency = Math.max(1, Math.min(4, poolSize - 1));
    const query: Query = (text, values) => this.#query(text, values);
    const transaction: Transaction = (work) => this.#transaction(work);
    this.plants = new PostgresPlants(query);
    this.tokens = new PostgresTokens(query, transaction);
    this.webhookSubscriptions = new PostgresWebhookSubscriptions(query, transaction);
    this.webhookOutbox = new PostgresWebhookOutbox(query, transaction);
    this.changes = new PostgresChanges(query, config, timeouts);
  }

  /** `timeouts` exist for tests, which cannot wait the real ones out. */
  static async open(config: PostgresConfig, timeouts: PostgresTimeouts = POSTGRES_TIMEOUTS): Promise<PostgresStore> {
    // Migrations run on a connection of their own, outside the pool and its query timeout: a long migration, or a
    // wait for another replica's migration lock, must run to its end rather than be cancelled after 10 s and
    // reported as unavailable. What bounds it instead is the operator (this runs at start, before serving).
    const migrator = new pg.Client(connectionConfig(config, timeouts));
    migrator.on('error', () => undefined);
    try {
      await migrator.connect();
      // Either could also come from the role, the database or the URL.
      await migrator.query('SET statement_timeout = 0; SET lock_timeout = 0');
      await migrate(migrator);
    } catch (error) {
      throw translate(error);
    } finally {
      await migrator.end().catch(() => undefined);
    }
    const pool = new pg.Pool(poolConfig(config, timeouts));
    // A connection that dies, idle or checked out between two queries, emits 'error'; unheard, that would end the
    // process. The failing query (if any) rejects on its own, and the pool replaces the connection on next use.
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    return new PostgresStore(pool, config, timeouts);
  }

  async #query<R extends pg.QueryResultRow>(text: string | pg.QueryConfig, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    try {
      // pg-pool discards a connection whose query failed, so a broken one is never reused.
      const run = () => this.#pool.query<R>(statement(text, values));
      // Tracing (src/tracing/, handed in by traceQueries): inside a traced request, a client span with the statement's
      // text (never its values).
      const tracer = this.#tracer;
      return await (tracer ? tracer.query(typeof text === 'string' ? text : text.text, run) : run());
    } catch (error) {
      this.#observer.storageFailed(unavailableKind(error) ?? 'other');
      throw translate(error);
    }
  }

  observe(observer: StorageObserver): void {
    this.#observer = observer;
  }

  traceQueries(tracer: QueryTracer): void {
    this.#tracer = tracer;
  }

  connectionPoolState(): ConnectionPoolState {
    return { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount };
  }

  /** `work` in one transaction on one pooled connection; rolled back if it throws. */
  async #transaction<T>(work: (query: Query) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw translate(error);
    }
    let broken: unknown;
    try {
      await client.query('BEGIN');
      const result = await work((text, values = []) => client.query(statement(text, values)));
      await client.query('COMMIT');
      return result;
    } catch (error) {
      broken = error;
      await client.query('ROLLBACK').catch(() => undefined);
      throw translate(error);
    } finally {
      // A connection whose statement failed is discarded rather than reused.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  async checkWritable(): Promise<void> {
    await this.#query(
      `INSERT INTO plantstore_heartbeat (id, checked_at) VALUES (1, now())
       ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`,
    );
  }

  /** Nothing of this store runs outside requests, so it has no incidents to report. */
  onIncident(_listener: (incident: StorageIncident) => void): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    await this.changes.close();
    await this.#pool.end();
  }
}
