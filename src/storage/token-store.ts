/**
 * The token sub-store (`Store.tokens`): API tokens, kept as hashes, with what each may do and until when. Each
 * consumer sees the slice it needs: the CLI TokenManagement, the token cache (src/auth/) TokenLookup, `plantstore copy`
 * TokenTransfer. Each database implements it in one module (src/storage/sqlite/tokens.ts,
 * src/storage/postgres/tokens.ts), mapping its rows through ./token-rows.ts.
 *
 * Scopes are names storage keeps without knowing them (src/auth/scopes.ts does): a token's are stored as given and
 * read back in that order. Expiry is an absolute time, or null for never; an expired token is still stored, found
 * and listed (the token cache tells it apart, and the operator sees what expired) until it is revoked.
 */

/** A token as the operator makes it; the token itself is never stored, only its hash. */
export interface NewToken {
  readonly name: string;
  /** SHA-256 of the token. */
  readonly hash: Buffer;
  /** What the token may do: scope names, each without whitespace. */
  readonly scopes: readonly string[];
  readonly createdAt: Date;
  /** When it stops being accepted; null: never. */
  readonly expiresAt: Date | null;
}

/** What the token cache needs of a stored token. */
export interface StoredToken {
  readonly name: string;
  readonly hash: Buffer;
  readonly scopes: readonly string[];
  readonly expiresAt: Date | null;
}

/** What `plantstore token list` shows: never the hash. */
export interface TokenInfo {
  readonly name: string;
  readonly scopes: readonly string[];
  readonly createdAt: Date;
  readonly expiresAt: Date | null;
  readonly lastUsedAt: Date | null;
}

/** A token as stored, with everything another database needs to keep it working: never the token itself. */
export interface TokenRecord extends NewToken {
  readonly lastUsedAt: Date | null;
}

export type TokenImportOutcome =
  | { readonly kind: 'created' }
  /** The same token was stored already (isSameToken); the last use was moved forward if this one is later. */
  | { readonly kind: 'replayed' }
  /** Another token holds this name or this hash: nothing was changed. */
  | { readonly kind: 'conflict'; readonly stored: TokenRecord };

/** What the operator manages (`plantstore token …`). */
interface TokenManagement {
  /** Rejects with DuplicateTokenNameError when the name is taken. */
  add(token: NewToken): Promise<void>;
  /** Every token, expired ones included, by name. */
  list(): Promise<TokenInfo[]>;
  /** Resolves false when no token has that name. */
  revoke(name: string): Promise<boolean>;
}

/** What the token cache (src/auth/authenticator.ts) needs. */
export interface TokenLookup {
  find(hash: Buffer): Promise<StoredToken | undefined>;
  /** Every stored token, expired ones included: the cache answers those differently from unknown ones. */
  all(): Promise<StoredToken[]>;
  /** Moves each named token's last use forward to the time given, never back; names no longer stored are skipped. */
  recordUse(uses: ReadonlyMap<string, Date>): Promise<void>;
}

/** Moving tokens between databases (`plantstore copy`): clients keep working with the tokens they have. */
interface TokenTransfer {
  /** Every token with its hash, scopes and times, in ascending byte order of name. Tokens are made by hand, so they are few. */
  exportAll(): Promise<TokenRecord[]>;
  /**
   * Stores tokens as another database had them (hashes, scopes, expiry, creation and last-use times), all committed
   * durably in one transaction before the promise resolves; one outcome per token, in input order. A token already
   * stored identically (isSameToken) is left as it is except that its last use moves forward, never back (as
   * recordUse does).
   */
  importAll(tokens: readonly TokenRecord[]): Promise<TokenImportOutcome[]>;
}

/** A database's tokens, every slice of them. */
export interface TokenStore extends TokenManagement, TokenLookup, TokenTransfer {}

/** Whether two tokens are the same token: everything but the last use, which only bookkeeping moves. */
export function isSameToken(a: NewToken, b: NewToken): boolean {
  return (
    a.name === b.name &&
    a.hash.equals(b.hash) &&
    a.createdAt.getTime() === b.createdAt.getTime() &&
    (a.expiresAt?.getTime() ?? null) === (b.expiresAt?.getTime() ?? null) &&
    a.scopes.length === b.scopes.length &&
    a.scopes.every((scope, index) => scope === b.scopes[index])
  );
}
