import {
  SQLITE_EXTENDED_CODES,
  blobToBuffer,
  prepare,
  prepareWrite,
  sqliteExtendedCode,
  transaction,
  type Connection,
  type Runners,
  type ReadRunner,
  type WriteRunner,
} from './connection.js';
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
import { isSameToken, type NewToken, type StoredToken, type TokenImportOutcome, type TokenInfo, type TokenRecord, type TokenStore } from '../token-store.js';

/** Times are milliseconds since the epoch; hashes are BLOBs, read as Uint8Arrays. */
type TokenRecordRow = TokenRecordRowOf<number, Uint8Array>;
const rows = tokenRows<number, Uint8Array>((ms) => new Date(ms), blobToBuffer);
const msOrNull = (date: Date | null) => date?.getTime() ?? null;

/**
 * The token reads the token cache and `serve`'s start check make, on a read connection: SqliteTokens's, and a worker
 * thread's store's (./delegating-store.ts), which reads the same file on a connection of its own and leaves
 * writes to the main thread. `read` runs each read, retried while another connection holds a lock it needs.
 */
export class SqliteTokenReads implements Pick<TokenStore, 'find' | 'all' | 'list'> {
  readonly #read: ReadRunner;
  readonly #statements;

  constructor(reader: Connection, read: ReadRunner) {
    this.#read = read;
    this.#statements = {
      // SQLite compares text bytewise (BINARY): the order PostgreSQL gives with COLLATE "C".
      list: prepare<[], TokenInfoRowOf<number>>(reader, `SELECT ${TOKEN_INFO_COLUMNS} FROM tokens ORDER BY name`),
      find: prepare<[Buffer], StoredTokenRowOf<number, Uint8Array>>(reader, `SELECT ${STORED_TOKEN_COLUMNS} FROM tokens WHERE hash = ?`),
      all: prepare<[], StoredTokenRowOf<number, Uint8Array>>(reader, `SELECT ${STORED_TOKEN_COLUMNS} FROM tokens`),
    };
  }

  list(): Promise<TokenInfo[]> {
    return this.#read(() => this.#statements.list.all().map(rows.info));
  }

  find(hash: Buffer): Promise<StoredToken | undefined> {
    return this.#read(() => {
      const row = this.#statements.find.get(hash);
      return row && rows.stored(row);
    });
  }

  all(): Promise<StoredToken[]> {
    return this.#read(() => this.#statements.all.all().map(rows.stored));
  }
}

/**
 * The token sub-store of SQLite: its reads (SqliteTokenReads) on the read connection; writes on the one write
 * connection, each a durable commit of its own that takes the write lock at once or throws SQLITE_BUSY having changed
 * nothing, which the runners retry; a write commits only into the database file still at its path (`runners.write`).
 */
export class SqliteTokens extends SqliteTokenReads implements TokenStore {
  readonly #db: Connection;
  readonly #read: ReadRunner;
  readonly #write: WriteRunner;
  readonly #statements;

  /** `db` is the write connection. */
  constructor(reader: Connection, db: Connection, runners: Runners) {
    super(reader, runners.read);
    this.#db = db;
    this.#read = runners.read;
    this.#write = runners.write;
    this.#statements = {
      exportAll: prepare<[], TokenRecordRow>(reader, `SELECT ${TOKEN_RECORD_COLUMNS} FROM tokens ORDER BY name`),
      add: prepareWrite<[string, Buffer, string, number, number | null]>(
        db,
        'INSERT INTO tokens (name, hash, scopes, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
      ),
      revoke: prepareWrite<[string]>(db, 'DELETE FROM tokens WHERE name = ?'),
      touch: prepareWrite<[number, string, number]>(
        db,
        'UPDATE tokens SET last_used_at = ? WHERE name = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      ),
      // Without a conflict target: a clash on the name or on the hash leaves the stored token alone.
      import: prepareWrite<[string, Buffer, string, number, number | null, number | null]>(
        db,
        `INSERT INTO tokens (${TOKEN_RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      ),
      // The token that stood in the way: the one of that name if any, else the one with that hash.
      clashing: prepare<[string, Buffer, string], TokenRecordRow>(
        db,
        `SELECT ${TOKEN_RECORD_COLUMNS} FROM tokens WHERE name = ? OR hash = ? ORDER BY name = ? DESC LIMIT 1`,
      ),
    };
  }

  async add(token: NewToken): Promise<void> {
    const { name, hash, scopes, createdAt, expiresAt } = token;
    const scopesText = scopesColumn(scopes);
    await insertTokenOnce(
      name,
      () => this.#write(() => void this.#statements.add.run(name, hash, scopesText, createdAt.getTime(), msOrNull(expiresAt))),
      // The name is the primary key; a clash of hashes (never in practice) is not a naming mistake.
      (error) => sqliteExtendedCode(error) === SQLITE_EXTENDED_CODES.CONSTRAINT_PRIMARYKEY,
    );
  }

  revoke(name: string): Promise<boolean> {
    return this.#write(() => this.#statements.revoke.run(name).changes > 0);
  }

  async recordUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    if (uses.size === 0) return;
    const entries = [...uses].map(([name, at]) => [name, at.getTime()] as const);
    const { touch } = this.#statements;
    await this.#write(() =>
      transaction(this.#db, () => {
        for (const [name, at] of entries) touch.run(at, name, at);
      }),
    );
  }

  exportAll(): Promise<TokenRecord[]> {
    return this.#read(() => this.#statements.exportAll.all().map(rows.record));
  }

  importAll(tokens: readonly TokenRecord[]): Promise<TokenImportOutcome[]> {
    const { touch, import: insert, clashing } = this.#statements;
    return this.#write(() =>
      transaction(this.#db, () =>
        tokens.map((token): TokenImportOutcome => {
          const lastUsedAt = msOrNull(token.lastUsedAt);
          const inserted = insert.run(token.name, token.hash, scopesColumn(token.scopes), token.createdAt.getTime(), msOrNull(token.expiresAt), lastUsedAt);
          if (inserted.changes === 1) return { kind: 'created' };
          const stored = rows.record(clashing.get(token.name, token.hash, token.name) as TokenRecordRow);
          if (!isSameToken(stored, token)) return { kind: 'conflict', stored };
          if (lastUsedAt !== null) touch.run(lastUsedAt, token.name, lastUsedAt);
          return { kind: 'replayed' };
        }),
      ),
    );
  }
}
