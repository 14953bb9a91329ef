import { SCOPES } from '../../src/auth/scopes.js';
import type { NewToken } from '../../src/storage/token-store.js';

/**
 * A token to store as `plantstore token create` makes one by default (every scope, created now, never expiring),
 * but for what `options` say otherwise.
 */
export function newToken(name: string, hash: Buffer, options: Partial<Pick<NewToken, 'scopes' | 'createdAt' | 'expiresAt'>> = {}): NewToken {
  return { name, hash, scopes: SCOPES, createdAt: new Date(), expiresAt: null, ...options };
}
