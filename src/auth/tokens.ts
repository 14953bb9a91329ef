import { createHash, randomBytes } from 'node:crypto';

const PREFIX = 'plst_';

/** 256 random bits, URL-safe; the prefix lets secret scanners recognise a leaked token. */
export function generateToken(): string {
  return PREFIX + randomBytes(32).toString('base64url');
}

/**
 * Tokens carry 256 bits of entropy, so a fast hash is enough: there is nothing to brute-force that a slow KDF
 * would protect. Only this hash is stored.
 */
export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
