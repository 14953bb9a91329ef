import { hash, randomBytes } from 'node:crypto';

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
  return Buffer.from(tokenHashHex(token), 'hex');
}

/** The same SHA-256 as hex: the one-shot hash to a string is several times cheaper than a Hash object and a Buffer. */
export function tokenHashHex(token: string): string {
  return hash('sha256', token, 'hex');
}
