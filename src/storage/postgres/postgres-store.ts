import pg from 'pg';
import type { DatabaseConfig } from '../../config.js';
import { ServiceUnavailableError } from '../../errors.js';
import { INT64_MAX, INT64_MIN } from '../../int64.js';
import {
  DuplicateTokenNameError,
  type CreateOutcome,
  type PlantQuery,
  type PlantToCreate,
  type Store,
  type StoredPlant,
  type StoredToken,
  type TokenInfo,
} from '../store.js';
import { migrate } from './migrations.js';

type PostgresConfig = Extract<DatabaseConfig, { kind: 'postgres' }>;

interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}

/** int8 as bigint, on this pool's connections only (never the process-wide pg.types). */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 ? (value: string) => BigInt(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** SQLSTATE classes meaning "the database cannot serve now": connection, resources, shutdown, read-only. */
const UNAVAILABLE_SQLSTATE = /^(08|53|57P|25006|40001|40P01|55P03|58)/;
const UNAVAILABLE_NODE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);

function translate(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  const message = (error as Error | undefined)?.message ?? '';
  const unavailable =
    (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_NODE.has(code))) ||
    /timeout|terminat|Connection|connect/i.test(message);
  if (unavailable) return Object.assign(new ServiceUnavailableError('storage is unavailable; retry shortly'), { cause: error });
  return error;
}

function toPlant(row: PlantRow): StoredPlant {
  return { id: row.id, name: row.name, tag: row.tag };
}

/**
 * PostgreSQL through a pg pool. Uniqueness, replays and conflicts are decided by the database, so they hold across
 * any number of instances; a create is answered only after its transaction commits (synchronous_commit on).
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres';
  readonly #pool: pg.Pool;

  private constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  static async open(config: PostgresConfig): Promise<PostgresStore> {
    const pool = new pg.Pool({
      connectionString: config.url,
      max: config.poolSize,
      types,
      // Never hang: a database that does not answer is a 503, not a stuck request.
      connectionTimeoutMillis: 3000,
      query_timeout: 10_000,
      statement_timeout: 10_000,
      idleTimeoutMillis: 30_000,
    });
    // An idle connection dropped by the server must not crash the process; the pool replaces it.
    pool.on('error', () => undefined);
    try {
      const client = await pool.connect();
      try {
        await migrate(client);
      } finally {
        client.release();
      }
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw translate(error);
    }
    return new PostgresStore(pool);
  }

  async #query<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    try {
      return await this.#pool.query<R>(text, values);
    } catch (error) {
      throw translate(error);
    }
  }

  async createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]> {
    const ids = plants.map((plant) => plant.id.toString());
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw translate(error);
    }
    try {
      await client.query('BEGIN');
      const inserted = await client.query<{ id: bigint }>(
        `INSERT INTO plants (id, name, tag)
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[])
         ON CONFLICT (id) DO NOTHING
         RETURNING id`,
        [ids, plants.map((plant) => plant.name), plants.map((plant) => plant.tag)],
      );
      const created = new Set(inserted.rows.map((row) => row.id));
      const existing = new Map<bigint, StoredPlant>();
      if (created.size < plants.length) {
        const others = plants.filter((plant) => !created.has(plant.id)).map((plant) => plant.id.toString());
        const rows = await client.query<PlantRow>('SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])', [others]);
        for (const row of rows.rows) existing.set(row.id, toPlant(row));
      }
      await client.query('COMMIT');
      client.release();
      return plants.map((plant): CreateOutcome => {
        if (created.has(plant.id)) return { status: 'created' };
        const stored = existing.get(plant.id);
        // Deleted between our insert and our read: this row alone is retried by the client.
        return stored ? { status: 'exists', stored } : { status: 'failed', error: new ServiceUnavailableError('the plant changed concurrently; retry') };
      });
    } catch (error) {
      // A broken connection is not returned to the pool.
      client.release(error as Error);
      throw translate(error);
    }
  }

  async getPlant(id: bigint): Promise<StoredPlant | undefined> {
    const result = await this.#query<PlantRow>('SELECT id, name, tag FROM plants WHERE id = $1', [id.toString()]);
    const row = result.rows[0];
    return row && toPlant(row);
  }

  async listPlants(query: PlantQuery): Promise<StoredPlant[]> {
    // "id >= from" keeps every page, the first included, one index range scan without leaving int64.
    if (query.after === INT64_MAX) return [];
    const from = (query.after === undefined ? INT64_MIN : query.after + 1n).toString();
    const result =
      query.tag === undefined
        ? await this.#query<PlantRow>('SELECT id, name, tag FROM plants WHERE id >= $1 ORDER BY id LIMIT $2', [from, query.limit])
        : await this.#query<PlantRow>('SELECT id, name, tag FROM plants WHERE tag = $3 AND id >= $1 ORDER BY id LIMIT $2', [
            from,
            query.limit,
            query.tag,
          ]);
    return result.rows.map(toPlant);
  }

  async deletePlant(id: bigint): Promise<boolean> {
    return ((await this.#query('DELETE FROM plants WHERE id = $1', [id.toString()])).rowCount ?? 0) > 0;
  }

  async ping(): Promise<void> {
    await this.#query('SELECT 1');
  }

  async addToken(name: string, hash: Buffer, createdAt: Date): Promise<void> {
    try {
      await this.#query('INSERT INTO tokens (name, hash, created_at) VALUES ($1, $2, $3)', [name, hash, createdAt]);
    } catch (error) {
      if ((error as { code?: unknown }).code === '23505') throw new DuplicateTokenNameError(name);
      throw error;
    }
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
    return (await this.#query<StoredToken>('SELECT name, hash FROM tokens WHERE hash = $1', [hash])).rows[0];
  }

  async allTokens(): Promise<StoredToken[]> {
    return (await this.#query<StoredToken>('SELECT name, hash FROM tokens')).rows;
  }

  async recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    await this.#query(
      `UPDATE tokens SET last_used_at = u.at
       FROM unnest($1::text[], $2::timestamptz[]) AS u(name, at)
       WHERE tokens.name = u.name AND (tokens.last_used_at IS NULL OR tokens.last_used_at < u.at)`,
      [[...uses.keys()], [...uses.values()]],
    );
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}
