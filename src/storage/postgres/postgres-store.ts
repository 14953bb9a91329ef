import pg from 'pg';
import { UNOBSERVED, type StorageObserver } from '../observer.js';
import { insertTokenOnce } from '../rows.js';
import type {
  ConnectionPoolState,
  Store,
  StorageIncident,
  StoredToken,
  TokenImportOutcome,
  TokenInfo,
  TokenRecord,
} from '../store.js';
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
} from './connection.js';
import { migrate } from './migrations.js';
import { PostgresPlants } from './plants.js';
import { PostgresWebhooks } from './webhooks.js';

function toToken(row: StoredToken): StoredToken {
  return { name: row.name, hash: row.hash };
}

interface TokenRecordRow {
  readonly name: string;
  readonly hash: Buffer;
  readonly created_at: Date;
  readonly last_used_at: Date | null;
}

function toTokenRecord(row: TokenRecordRow): TokenRecord {
  return { name: row.name, hash: row.hash, createdAt: row.created_at, lastUsedAt: row.last_used_at };
}

/** Every token, by name in byte order (COLLATE "C"), the order SQLite gives: the database's collation may differ. */
const EXPORT_TOKENS = 'SELECT name, hash, created_at, last_used_at FROM tokens ORDER BY name COLLATE "C"';
/** Without a conflict target: a clash on the name or on the hash leaves the stored token alone. */
const IMPORT_TOKEN = `INSERT INTO tokens (name, hash, created_at, last_used_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT DO NOTHING RETURNING name`;
/** The token that stood in the way: the one of that name if any, else the one with that hash. */
const CLASHING_TOKEN = `SELECT name, hash, created_at, last_used_at FROM tokens WHERE name = $1 OR hash = $2
  ORDER BY name = $1 DESC LIMIT 1`;
const TOUCH_TOKEN = 'UPDATE tokens SET last_used_at = $2 WHERE name = $1 AND (last_used_at IS NULL OR last_used_at < $2)';

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
  /** Plants and webhooks, each on this store's pool and its error translation. */
  readonly plants: PostgresPlants;
  readonly webhooks: PostgresWebhooks;

  private constructor(pool: pg.Pool, poolSize: number) {
    this.#pool = pool;
    this.writeConcurrency = Math.max(1, Math.min(4, poolSize - 1));
    const query: Query = (text, values) => this.#query(text, values);
    this.plants = new PostgresPlants(query);
    this.webhooks = new PostgresWebhooks(query, (work) => this.#transaction(work));
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
      return await this.#pool.query<R>(statement(text, values));
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

  addToken(name: string, hash: Buffer, createdAt: Date): Promise<void> {
    return insertTokenOnce(
      name,
      async () => {
        await this.#query('INSERT INTO tokens (name, hash, created_at) VALUES ($1, $2, $3)', [name, hash, createdAt]);
      },
      // The name's primary key, as on SQLite; a clash of hashes (never in practice) is not a naming mistake.
      (error) => {
        const { code, constraint } = error as { code?: unknown; constraint?: unknown };
        return code === '23505' && constraint === 'tokens_pkey';
      },
    );
  }

  async listTokens(): Promise<TokenInfo[]> {
    const result = await this.#query<{ name: string; created_at: Date; last_used_at: Date | null }>(
      'SELECT name, created_at, last_used_at FROM tokens ORDER BY name',
    );
    return result.rows.map((row) => ({ name: row.name, createdAt: row.created_at, lastUsedAt: row.last_used_at }));
  }

  async revokeToken(name: string): Promise<boolean> {
    return ((await this.#query('DELETE FROM tokens WHERE name = $1', [name])).rowCount ?? 0) > 0;
  }

  async findToken(hash: Buffer): Promise<StoredToken | undefined> {
    const row = (await this.#query<StoredToken>('SELECT name, hash FROM tokens WHERE hash = $1', [hash])).rows[0];
    return row && toToken(row);
  }

  async allTokens(): Promise<StoredToken[]> {
    return (await this.#query<StoredToken>('SELECT name, hash FROM tokens')).rows.map(toToken);
  }

  async recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    if (uses.size === 0) return;
    await this.#query(
      `UPDATE tokens SET last_used_at = u.at
       FROM unnest($1::text[], $2::timestamptz[]) AS u(name, at)
       WHERE tokens.name = u.name AND (tokens.last_used_at IS NULL OR tokens.last_used_at < u.at)`,
      [[...uses.keys()], [...uses.values()]],
    );
  }

  async exportTokens(): Promise<TokenRecord[]> {
    return (await this.#query<TokenRecordRow>(EXPORT_TOKENS)).rows.map(toTokenRecord);
  }

  async importTokens(tokens: readonly TokenRecord[]): Promise<TokenImportOutcome[]> {
    if (tokens.length === 0) return [];
    return this.#transaction(async (query) => {
      const outcomes: TokenImportOutcome[] = [];
      for (const token of tokens) {
        const inserted = await query(IMPORT_TOKEN, [token.name, token.hash, token.createdAt, token.lastUsedAt]);
        if (inserted.rowCount === 1) {
          outcomes.push({ status: 'created' });
          continue;
        }
        const stored = (await query<TokenRecordRow>(CLASHING_TOKEN, [token.name, token.hash])).rows[0] as TokenRecordRow;
        if (stored.name !== token.name || !stored.hash.equals(token.hash) || stored.created_at.getTime() !== token.createdAt.getTime()) {
          outcomes.push({ status: 'conflict', stored: toTokenRecord(stored) });
          continue;
        }
        if (token.lastUsedAt !== null) await query(TOUCH_TOKEN, [token.name, token.lastUsedAt]);
        outcomes.push({ status: 'exists' });
      }
      return outcomes;
    });
  }

  /** Nothing of this store runs outside requests, so it has no incidents to report. */
  onIncident(_listener: (incident: StorageIncident) => void): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}
