import { blobToBuffer, prepare, prepareWrite, transaction, type Connection } from './connection.js';
import type { TokenImportOutcome, TokenRecord } from '../store.js';

/** A tokens row as SQLite keeps it: times in milliseconds since the epoch. */
export interface TokenRecordRow {
  readonly name: string;
  readonly hash: Uint8Array;
  readonly created_at: number;
  readonly last_used_at: number | null;
}

export function toTokenRecord(row: TokenRecordRow): TokenRecord {
  return {
    name: row.name,
    hash: blobToBuffer(row.hash),
    createdAt: new Date(row.created_at),
    lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
  };
}

/**
 * The SQLite store's writes of tokens and the heartbeat, on the one connection that writes (plants.ts and webhooks.ts
 * write theirs on the same connection). Each method is one durable commit that
 * either takes the write lock at once or throws SQLITE_BUSY having changed nothing (the connection's busy timeout
 * is 0 and transactions begin IMMEDIATE), so the store can retry it later without blocking the event loop.
 */
export class SqliteWriter {
  readonly #db: Connection;
  readonly #statements;

  constructor(db: Connection) {
    this.#db = db;
    this.#statements = {
      addToken: prepareWrite<[string, Buffer, number]>(db, 'INSERT INTO tokens (name, hash, created_at) VALUES (?, ?, ?)'),
      revokeToken: prepareWrite<[string]>(db, 'DELETE FROM tokens WHERE name = ?'),
      heartbeat: prepareWrite<[number]>(
        db,
        'INSERT INTO plantstore_heartbeat (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at',
      ),
      touchToken: prepareWrite<[number, string, number]>(
        db,
        'UPDATE tokens SET last_used_at = ? WHERE name = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      ),
      // Without a conflict target: a clash on the name or on the hash leaves the stored token alone.
      importToken: prepareWrite<[string, Buffer, number, number | null]>(
        db,
        'INSERT INTO tokens (name, hash, created_at, last_used_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
      ),
      // The token that stood in the way: the one of that name if any, else the one with that hash.
      clashingToken: prepare<[string, Buffer, string], TokenRecordRow>(
        db,
        'SELECT name, hash, created_at, last_used_at FROM tokens WHERE name = ? OR hash = ? ORDER BY name = ? DESC LIMIT 1',
      ),
    };
  }

  /** Throws SQLITE_CONSTRAINT_PRIMARYKEY when the name is taken. */
  addToken(name: string, hash: Buffer, createdAt: number): void {
    this.#statements.addToken.run(name, hash, createdAt);
  }

  revokeToken(name: string): boolean {
    return this.#statements.revokeToken.run(name).changes > 0;
  }

  recordTokenUse(uses: ReadonlyArray<readonly [string, number]>): void {
    const { touchToken } = this.#statements;
    transaction(this.#db, () => {
      for (const [name, at] of uses) touchToken.run(at, name, at);
    });
  }

  importTokens(tokens: readonly TokenRecord[]): TokenImportOutcome[] {
    const { touchToken, importToken, clashingToken } = this.#statements;
    return transaction(this.#db, () =>
      tokens.map((token): TokenImportOutcome => {
        const createdAt = token.createdAt.getTime();
        const lastUsedAt = token.lastUsedAt?.getTime() ?? null;
        if (importToken.run(token.name, token.hash, createdAt, lastUsedAt).changes === 1) return { status: 'created' };
        const stored = clashingToken.get(token.name, token.hash, token.name) as TokenRecordRow;
        if (stored.name !== token.name || !blobToBuffer(stored.hash).equals(token.hash) || stored.created_at !== createdAt) {
          return { status: 'conflict', stored: toTokenRecord(stored) };
        }
        if (lastUsedAt !== null) touchToken.run(lastUsedAt, token.name, lastUsedAt);
        return { status: 'exists' };
      }),
    );
  }

  /** One durable commit of the heartbeat row. */
  heartbeat(checkedAt: number): void {
    this.#statements.heartbeat.run(checkedAt);
  }

  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
