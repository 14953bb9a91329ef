import type { StoredToken } from '../storage/token-store.js';
import { grantedScopes, type Scope } from './scopes.js';

/** A stored token as the hot path checks it: scopes as a set, expiry as a number (Infinity: never). */
export interface CachedToken {
  readonly name: string;
  readonly scopes: ReadonlySet<Scope>;
  readonly expiresAtMs: number;
}

export function toCached(token: StoredToken): CachedToken {
  return { name: token.name, scopes: grantedScopes(token.scopes), expiresAtMs: token.expiresAt?.getTime() ?? Infinity };
}
