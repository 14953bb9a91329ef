import pg from 'pg';
import type { DatabaseConfig } from '../../config.js';
import { StorageUnavailableError, unavailableIf, type StorageErrorKind } from '../errors.js';
import { UNOBSERVED, type StorageObserver } from '../observer.js';
import { keysetFrom, toStoredPlant, type PlantRow } from '../rows.js';
import type { ConnectionPoolState, CreateOutcome, PlantQuery, PlantToCreate, Store, StorageIncident, StoredPlant } from '../store.js';
import { migrate } from './migrations.js';
import { PostgresTokens } from './tokens.js';
import { PostgresWebhooks } from './webhooks.js';

type PostgresConfig = Extract<DatabaseConfig, { kind: 'postgres' }>;

/** int8 as bigint, on this pool's connections only (never the process-wide pg.types). */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 ? (value: string) => BigInt(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * SQLSTATEs meaning "the database cannot serve now, retry", by kind: connection exceptions (08), insufficient
 * resources (53; 53100 is a full disk), operator intervention (57P01-57P04 shutdown/restart, 57014 statement
 * timeout), system errors (58), serialization failure and deadlock (40001, 40P01), lock not available (55P03),
 * read-only transaction (25006). Also invalid authorization (class 28, e.g. 28P01 once the role's password is
 * rotated under running instances) and a database that does not exist (3D000, dropped or being restored): no request
 * and no code path of this service causes them, a retry succeeds once the operator has put credentials or database
 * right, and meanwhile the instance should be taken out of rotation (unavailable storage also fails readiness), not
 * counted as a bug. The cause is still logged with every 5xx, and the CLI prints it.
 */
const UNAVAILABLE_SQLSTATE: ReadonlyArray<readonly [RegExp, StorageErrorKind]> = [
  [/^(08|28|3D000$|57P0)/, 'connection'],
  [/^57014$/, 'timeout'],
  [/^53100$/, 'disk_full'],
  [/^53/, 'resources'],
  [/^58/, 'io'],
  [/^(40001|40P01|55P03)$/, 'locked'],
  [/^25006$/, 'read_only'],
];
/** Socket errors on the way to the server; ENOENT is a Unix socket path with no server behind it. */
const UNAVAILABLE_NODE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOENT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
/** What pg and pg-pool throw, without a code, when a connection is lost, cannot be made in time or a query times out. */
const UNAVAILABLE_MESSAGE: ReadonlyArray<readonly [RegExp, StorageErrorKind]> = [
  [/^(timeout exceeded when trying to connect|Query read timeout)/, 'timeout'],
  [/^(Connection terminated|Client has encountered a connection error|Connection closed)/, 'connection'],
];

/** The kind of a pg or socket error meaning "not now"; undefined for anything else. */
export function unavailableKind(error: unknown): StorageErrorKind | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_NODE.has(code)) return code === 'ETIMEDOUT' ? 'timeout' : 'connection';
    const kind = UNAVAILABLE_SQLSTATE.find(([pattern]) => pattern.test(code))?.[1];
    if (kind) return kind;
  }
  const message = (error as { message?: unknown } | undefined)?.message;
  if (typeof message !== 'string') return undefined;
  return UNAVAILABLE_MESSAGE.find(([pattern]) => pattern.test(message))?.[1];
}

/** A pg or socket error meaning "not now" as StorageUnavailableError with the original as its cause; anything else as it is. */
export function translate(error: unknown): unknown {
  return unavailableIf(error, (cause) => unavailableKind(cause) !== undefined);
}

/**
 * Inserts what is new in one autocommit statement and returns the ids it inserted. Rows go in ascending id order, so
 * two batches sharing ids (from this instance or another) wait on each other in one direction only and never
 * deadlock. It is a named (prepared) statement, parsed and planned once per connection: cheaper per row than an
 * unnamed one, and than a single statement that also read back the rows already there (a CTE joined to plants);
 * the figures are in BENCHMARKS.md ("PostgreSQL").
 */
const INSERT_PLANTS: pg.QueryConfig = {
  name: 'plantstore_insert_plants',
  // The webhook outbox is written by the same statement, so by the same transaction and commit: one event per plant
  // it inserted and subscription active then. With no subscription the join is empty and costs next to nothing.
  text: `WITH inserted AS (
      INSERT INTO plants (id, name, tag)
      SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) AS t(id, name, tag) ORDER BY id
      ON CONFLICT (id) DO NOTHING
      RETURNING id, name, tag
    ), events AS (
      INSERT INTO webhook_events (subscription_id, plant_id, name, tag, created_at, next_attempt_at)
      SELECT s.id, i.id, i.name, i.tag, now(), now() FROM inserted i CROSS JOIN webhook_subscriptions s WHERE s.disabled_at IS NULL
    )
    SELECT id FROM inserted`,
};

/** The keyset list queries (`id >= $1`), exported so test/indexes.test.ts checks the plans of these very texts. */
export const POSTGRES_LIST_QUERIES = {
  listAll: 'SELECT id, name, tag FROM plants WHERE id >= $1 ORDER BY id LIMIT $2',
  listByTag: 'SELECT id, name, tag FROM plants WHERE tag = $3 AND id >= $1 ORDER BY id LIMIT $2',
} as const;

/** The stored rows of ids the insert stood back from: replays or conflicts, told apart by the caller. */
const READ_PLANTS = 'SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])';

/**
 * Insert attempts per create call at most. A second is needed only for an id whose stored row was deleted between
 * the insert and the read; more, only if that race repeats on the same id.
 */
const CREATE_ATTEMPTS = 3;

/**
 * The first copy of each id, in input order. The write queue passes a turn's creates as they came, repeats
 * included; a repeat must not be reported created twice: like SQLite, later copies are answered as the first one left them.
 */
function firstCopies(plants: readonly PlantToCreate[]): Map<bigint, { readonly index: number; readonly plant: PlantToCreate }> {
  const first = new Map<bigint, { index: number; plant: PlantToCreate }>();
  plants.forEach((plant, index) => {
    if (!first.has(plant.id)) first.set(plant.id, { index, plant });
  });
  return first;
}

/** Bounds every wait on the database, so an unreachable or stuck server is a prompt StorageUnavailableError, never a hang. */
export const POSTGRES_TIMEOUTS = {
  /** Getting a connection: opening a new one, or waiting for a free one when the pool is busy. */
  connectMs: 2000,
  /** One statement, server side (statement_timeout) and client side (query_timeout, for a silent network). */
  queryMs: 10_000,
} as const;

export type PostgresTimeouts = { readonly [K in keyof typeof POSTGRES_TIMEOUTS]: number };

/** Last, so it wins: PostgreSQL applies the -c switches of a connection's options in order. */
const SYNCHRONOUS_COMMIT_ON = '-c synchronous_commit=on';

/**
 * The URL without its `options` parameter, and the options to send instead: the URL's own, then synchronous_commit=on.
 * pg lets an `options` in the URL replace the pool's `options` outright, so the URL's must be taken out and joined.
 */
function durableConnection(url: string): { connectionString: string; options: string } {
  const parsed = new URL(url);
  // pg keeps the last of repeated parameters.
  const given = parsed.searchParams.getAll('options').at(-1);
  if (given === undefined) return { connectionString: url, options: SYNCHRONOUS_COMMIT_ON };
  parsed.searchParams.delete('options');
  return { connectionString: parsed.toString(), options: given.trim() === '' ? SYNCHRONOUS_COMMIT_ON : `${given} ${SYNCHRONOUS_COMMIT_ON}` };
}

/**
 * Every connection's settings, pooled or not. Every connection asks for synchronous_commit=on itself: a 200 must mean
 * the commit's WAL is flushed, whatever default the server, database or role was given (managed services sometimes
 * turn it off), and whatever the URL's `options` say.
 */
function connectionConfig(config: PostgresConfig, timeouts: PostgresTimeouts): pg.ClientConfig {
  return {
    // sslmode, PGHOST, PGUSER, PGPASSWORD and the rest are read by pg itself from the URL and the environment.
    ...durableConnection(config.url),
    types,
    connectionTimeoutMillis: timeouts.connectMs,
    // Notices a peer that vanished without closing the connection (a failed-over managed database).
    keepAlive: true,
  };
}

/** The pool's settings: every statement a request makes is bounded by the query timeout. */
export function poolConfig(config: PostgresConfig, timeouts: PostgresTimeouts = POSTGRES_TIMEOUTS): pg.PoolConfig {
  return {
    ...connectionConfig(config, timeouts),
    max: config.poolSize,
    query_timeout: timeouts.queryMs,
    statement_timeout: timeouts.queryMs,
    idleTimeoutMillis: 30_000,
  };
}

/**
 * PostgreSQL through a pg pool. Uniqueness, replays and conflicts are decided by the database, so they hold across
 * any number of instances; a create is answered only after its transaction commits (synchronous_commit on).
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
  /** Subscriptions and their outbox, on this store's pool and its error translation. */
  readonly webhooks: PostgresWebhooks;
  /** Tokens, likewise. */
  readonly tokens: PostgresTokens;

  private constructor(pool: pg.Pool, poolSize: number) {
    this.#pool = pool;
    this.writeConcurrency = Math.max(1, Math.min(4, poolSize - 1));
    this.webhooks = new PostgresWebhooks(
      (text, values) => this.#query(text, values),
      (work) => this.#transaction(work),
    );
    this.tokens = new PostgresTokens(
      (text, values) => this.#query(text, values),
      (work) => this.#transaction(work),
    );
  }

  /** `timeouts` exist for tests, which cannot wait the real ones out. */
  static async open(config: PostgresConfig, timeouts: PostgresTimeouts = POSTGRES_TIMEOUTS): Promise<PostgresStore> {
    // Migrations run on a connection of their own, outside the pool and its query timeout: a long migration, or a
    // wait for another instance's migration lock, must run to its end rather than be cancelled after 10 s and
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
    return new PostgresStore(pool, config.poolSize);
  }

  async #query<R extends pg.QueryResultRow>(text: string | pg.QueryConfig, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    try {
      // pg-pool discards a connection whose query failed, so a broken one is never reused.
      return await this.#pool.query<R>(typeof text === 'string' ? { text, values } : { ...text, values });
    } catch (error) {
      this.#observer.storageFailed(unavailableKind(error) ?? 'other');
      throw translate(error);
    }
  }

  observe(observer: StorageObserver): void {
    this.#observer = observer;
  }

  connectionPoolState(): ConnectionPoolState {
    return { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount };
  }

  /** `work` in one transaction on one pooled connection; rolled back if it throws. */
  async #transaction<T>(work: (query: <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<pg.QueryResult<R>>) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw translate(error);
    }
    let broken: unknown;
    try {
      await client.query('BEGIN');
      const result = await work((text, values = []) => client.query({ text, values }));
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

  async createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]> {
    if (plants.length === 0) return [];
    const first = firstCopies(plants);
    const outcomes = new Map<bigint, CreateOutcome>();
    let pending = [...first.values()].map((copy) => copy.plant);
    let cutShort: unknown;
    try {
      for (let attempt = 0; attempt < CREATE_ATTEMPTS && pending.length > 0; attempt += 1) {
        // One autocommit statement, one round trip. synchronous_commit is on for every connection (poolConfig), and
        // pg resolves only at ReadyForQuery, which the server sends after the implicit commit is flushed.
        const inserted = await this.#query<{ id: bigint }>(INSERT_PLANTS, [
          pending.map((plant) => plant.id.toString()),
          pending.map((plant) => plant.name),
          pending.map((plant) => plant.tag),
        ]);
        for (const row of inserted.rows) outcomes.set(row.id, { status: 'created' });
        const others = pending.filter((plant) => !outcomes.has(plant.id));
        if (others.length === 0) break;
        // A second round trip only when some ids were already there: their stored content decides replay or conflict.
        const stored = await this.#query<PlantRow>(READ_PLANTS, [others.map((plant) => plant.id.toString())]);
        for (const row of stored.rows) outcomes.set(row.id, { status: 'exists', stored: toStoredPlant(row) });
        // Neither inserted nor found: the row that stood in the way was deleted between the two statements, so the
        // next attempt inserts ours.
        pending = others.filter((plant) => !outcomes.has(plant.id));
      }
    } catch (error) {
      // Nothing answered yet: the batch is refused as a whole. Otherwise rows already committed keep their answer
      // (created now, rather than refused and retried by the client into a replay), and only the rest fail with this error.
      if (outcomes.size === 0) throw error;
      cutShort = error;
    }
    const unanswered = cutShort ?? new StorageUnavailableError('the plant changed concurrently; retry');
    return plants.map((plant, index): CreateOutcome => {
      const outcome: CreateOutcome = outcomes.get(plant.id) ?? { status: 'failed', error: unanswered as Error };
      const firstCopy = first.get(plant.id);
      if (outcome.status === 'created' && firstCopy !== undefined && firstCopy.index !== index) {
        return { status: 'exists', stored: toStoredPlant(firstCopy.plant) };
      }
      return outcome;
    });
  }

  async getPlant(id: bigint): Promise<StoredPlant | undefined> {
    const result = await this.#query<PlantRow>('SELECT id, name, tag FROM plants WHERE id = $1', [id.toString()]);
    const row = result.rows[0];
    return row && toStoredPlant(row);
  }

  async listPlants(query: PlantQuery): Promise<StoredPlant[]> {
    const from = keysetFrom(query.after)?.toString();
    if (from === undefined) return [];
    const result =
      query.tag === undefined
        ? await this.#query<PlantRow>(POSTGRES_LIST_QUERIES.listAll, [from, query.limit])
        : await this.#query<PlantRow>(POSTGRES_LIST_QUERIES.listByTag, [from, query.limit, query.tag]);
    return result.rows.map(toStoredPlant);
  }

  async deletePlant(id: bigint): Promise<boolean> {
    return ((await this.#query('DELETE FROM plants WHERE id = $1', [id.toString()])).rowCount ?? 0) > 0;
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
    await this.#pool.end();
  }
}
