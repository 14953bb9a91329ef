import { DuplicateTokenNameError } from './errors.js';
import type { StoredToken, TokenInfo, TokenRecord } from './token-store.js';

/**
 * Rows of the tokens table as both databases' drivers return them, and their mapping to the token-store types. The
 * drivers differ only in how they give a time (`Time`: SQLite milliseconds since the epoch, PostgreSQL a Date) and a
 * hash (SQLite a Uint8Array, PostgreSQL a Buffer).
 *
 * Scopes are one text column in both databases: the names separated by single spaces, as OAuth writes a scope list
 * (RFC 6749 §3.3) and as the WWW-Authenticate `scope` attribute carries it; '' is a token with none. The same form
 * on both sides keeps one mapping and one migration, and an operator reading the table sees the names themselves.
 */

/** The columns of a tokens row that a TokenRecord carries. */
export const TOKEN_RECORD_COLUMNS = 'name, hash, scopes, created_at, expires_at, last_used_at';
/** The columns the token cache reads. */
export const STORED_TOKEN_COLUMNS = 'name, hash, scopes, expires_at';
/** The columns `token list` shows. */
export const TOKEN_INFO_COLUMNS = 'name, scopes, created_at, expires_at, last_used_at';

export interface TokenRecordRowOf<Time, Hash extends Uint8Array> {
  readonly name: string;
  readonly hash: Hash;
  readonly scopes: string;
  readonly created_at: Time;
  readonly expires_at: Time | null;
  readonly last_used_at: Time | null;
}

export type StoredTokenRowOf<Time, Hash extends Uint8Array> = Pick<TokenRecordRowOf<Time, Hash>, 'name' | 'hash' | 'scopes' | 'expires_at'>;
export type TokenInfoRowOf<Time> = Omit<TokenRecordRowOf<Time, Uint8Array>, 'hash'>;

/** The scopes column of a list of scope names. */
export function scopesColumn(scopes: readonly string[]): string {
  for (const scope of scopes) {
    // A name with a space in it would read back as two.
    if (!/^\S+$/.test(scope)) throw new Error(`a scope name must be non-empty text without whitespace, got ${JSON.stringify(scope)}`);
  }
  return scopes.join(' ');
}

/** The scope names of a scopes column. */
export function scopesOf(column: string): string[] {
  return column === '' ? [] : column.split(' ');
}

/** Maps one database's rows: `toDate` reads its times, `toBuffer` its hashes. */
export function tokenRows<Time, Hash extends Uint8Array>(toDate: (time: Time) => Date, toBuffer: (hash: Hash) => Buffer) {
  const date = (time: Time | null) => (time === null ? null : toDate(time));
  return {
    record: (row: TokenRecordRowOf<Time, Hash>): TokenRecord => ({
      name: row.name,
      hash: toBuffer(row.hash),
      scopes: scopesOf(row.scopes),
      createdAt: toDate(row.created_at),
      expiresAt: date(row.expires_at),
      lastUsedAt: date(row.last_used_at),
    }),
    stored: (row: StoredTokenRowOf<Time, Hash>): StoredToken => ({
      name: row.name,
      hash: toBuffer(row.hash),
      scopes: scopesOf(row.scopes),
      expiresAt: date(row.expires_at),
    }),
    info: (row: TokenInfoRowOf<Time>): TokenInfo => ({
      name: row.name,
      scopes: scopesOf(row.scopes),
      createdAt: toDate(row.created_at),
      expiresAt: date(row.expires_at),
      lastUsedAt: date(row.last_used_at),
    }),
  };
}

/** Runs the insert of a token; a clash on the name (told by the database's own `isNameTaken`) becomes DuplicateTokenNameError. */
export async function insertTokenOnce(name: string, insert: () => Promise<void>, isNameTaken: (error: unknown) => boolean): Promise<void> {
  try {
    await insert();
  } catch (error) {
    if (isNameTaken(error)) throw new DuplicateTokenNameError(name);
    throw error;
  }
}
