import {
  STORED_TOKEN_COLUMNS,
  TOKEN_INFO_COLUMNS,
  TOKEN_RECORD_COLUMNS,
  insertTokenOnce,
  scopesColumn,
  tokenRows,
  type StoredTokenRowOf,
  type TokenInfoRowOf,
  type TokenRecordRowOf,
} from '../token-rows.js';
import type { Query, Transaction } from './connection.js';
import { isSameToken, type NewToken, type StoredToken, type TokenImportOutcome, type TokenInfo, type TokenRecord, type TokenStore } from '../token-store.js';

/** pg gives times as Dates and bytea as Buffers: rows map as they come. */
type TokenRecordRow = TokenRecordRowOf<Date, Buffer>;
const asIs = <T>(value: T) => value;
const rows = tokenRows<Date, Buffer>(asIs, asIs);

/** Every token, by name in byte order (COLLATE "C"), the order SQLite gives: the database's collation may differ. */
const EXPORT_TOKENS = `SELECT ${TOKEN_RECORD_COLUMNS} FROM tokens ORDER BY name COLLATE "C"`;
/** Without a conflict target: a clash on the name or on the hash leaves the stored token alone. */
const IMPORT_TOKEN = `INSERT INTO tokens (${TOKEN_RECORD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING name`;
/** The token that stood in the way: the one of that name if any, else the one with that hash. */
const CLASHING_TOKEN = `SELECT ${TOKEN_RECORD_COLUMNS} FROM tokens WHERE name = $1 OR hash = $2 ORDER BY name = $1 DESC LIMIT 1`;
const TOUCH_TOKEN = 'UPDATE tokens SET last_used_at = $2 WHERE name = $1 AND (last_used_at IS NULL OR last_used_at < $2)';

/** The token sub-store of PostgreSQL; every statement goes through the store's pool and its error translation. */
export class PostgresTokens implements TokenStore {
  readonly #query: Query;
  readonly #transaction: Transaction;

  constructor(query: Query, transaction: Transaction) {
    this.#query = query;
    this.#transaction = transaction;
  }

  async add(token: NewToken): Promise<void> {
    const { name, hash, scopes, createdAt, expiresAt } = token;
    const scopesText = scopesColumn(scopes);
    await insertTokenOnce(
      name,
      async () => {
        await this.#query('INSERT INTO tokens (name, hash, scopes, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
          name,
          hash,
          scopesText,
          createdAt,
          expiresAt,
        ]);
      },
      // The name's primary key, as on SQLite; a clash of hashes (never in practice) is not a naming mistake.
      (error) => {
        const { code, constraint } = error as { code?: unknown; constraint?: unknown };
        return code === '23505' && constraint === 'tokens_pkey';
      },
    );
  }

  async list(): Promise<TokenInfo[]> {
    const result = await this.#query<TokenInfoRowOf<Date>>(`SELECT ${TOKEN_INFO_COLUMNS} FROM tokens ORDER BY name COLLATE "C"`);
    return result.rows.map(rows.info);
  }

  async revoke(name: string): Promise<boolean> {
    return ((await this.#query('DELETE FROM tokens WHERE name = $1', [name])).rowCount ?? 0) > 0;
  }

  async find(hash: Buffer): Promise<StoredToken | undefined> {
    const row = (await this.#query<StoredTokenRowOf<Date, Buffer>>(`SELECT ${STORED_TOKEN_COLUMNS} FROM tokens WHERE hash = $1`, [hash])).rows[0];
    return row && rows.stored(row);
  }

  async all(): Promise<StoredToken[]> {
    return (await this.#query<StoredTokenRowOf<Date, Buffer>>(`SELECT ${STORED_TOKEN_COLUMNS} FROM tokens`)).rows.map(rows.stored);
  }

  async recordUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    if (uses.size === 0) return;
    await this.#query(
      `UPDATE tokens SET last_used_at = u.at
       FROM unnest($1::text[], $2::timestamptz[]) AS u(name, at)
       WHERE tokens.name = u.name AND (tokens.last_used_at IS NULL OR tokens.last_used_at < u.at)`,
      [[...uses.keys()], [...uses.values()]],
    );
  }

  async exportAll(): Promise<TokenRecord[]> {
    return (await this.#query<TokenRecordRow>(EXPORT_TOKENS)).rows.map(rows.record);
  }

  async importAll(tokens: readonly TokenRecord[]): Promise<TokenImportOutcome[]> {
    if (tokens.length === 0) return [];
    return this.#transaction(async (query) => {
      const outcomes: TokenImportOutcome[] = [];
      for (const token of tokens) {
        const { name, hash, scopes, createdAt, expiresAt, lastUsedAt } = token;
        const inserted = await query(IMPORT_TOKEN, [name, hash, scopesColumn(scopes), createdAt, expiresAt, lastUsedAt]);
        if (inserted.rowCount === 1) {
          outcomes.push({ kind: 'created' });
          continue;
        }
        const stored = rows.record((await query<TokenRecordRow>(CLASHING_TOKEN, [name, hash])).rows[0] as TokenRecordRow);
        if (!isSameToken(stored, token)) {
          outcomes.push({ kind: 'conflict', stored });
          continue;
        }
        if (lastUsedAt !== null) await query(TOUCH_TOKEN, [name, lastUsedAt]);
        outcomes.push({ kind: 'replayed' });
      }
      return outcomes;
    });
  }
}
