import { timingSafeEqual } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { MalformedCredentialsError, UnauthorizedError } from '../errors.js';
import type { Store, StoredToken } from '../storage/store.js';
import { tokenHashHex } from './tokens.js';

/** RFC 6750 §2.1 b64token. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const CREDENTIALS = /^([^ ]+)(?: +(.*))?$/;

/** The token of an `Authorization: Bearer <token>` header; the scheme name is case-insensitive (RFC 7235). */
export function readBearerToken(header: string | undefined): string {
  const match = header === undefined ? null : CREDENTIALS.exec(header.trim());
  if (!match) throw new UnauthorizedError('authentication required: send Authorization: Bearer <token>');
  const [, scheme = '', token] = match;
  // The rejected credentials are never echoed: under another scheme they may be a password.
  if (scheme.toLowerCase() !== 'bearer') throw new UnauthorizedError('authentication scheme is not Bearer: send Authorization: Bearer <token>');
  if (token === undefined || !B64TOKEN.test(token)) {
    throw new MalformedCredentialsError('malformed Authorization header: expected Bearer followed by one token');
  }
  return token;
}

/**
 * Checks tokens against the store through a cache of every valid token's hash, refreshed every `refreshMs`:
 * the hot path is one hash and one map lookup, and a revocation (by any instance or the CLI) takes effect within
 * one refresh. Last use is recorded in memory and written with the refresh, never on the request path.
 */
export class TokenAuthenticator {
  readonly #store: Store;
  readonly #refreshMs: number;
  readonly #log: FastifyBaseLogger;
  #byHash = new Map<string, StoredToken>();
  #uses = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(store: Store, refreshMs: number, log: FastifyBaseLogger) {
    this.#store = store;
    this.#refreshMs = refreshMs;
    this.#log = log;
  }

  async start(): Promise<void> {
    await this.refresh();
    if (this.#refreshMs > 0) {
      this.#timer = setInterval(() => void this.refresh(), this.#refreshMs);
      this.#timer.unref();
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#flushUses();
  }

  async refresh(): Promise<void> {
    try {
      const tokens = await this.#store.allTokens();
      this.#byHash = new Map(tokens.map((token) => [token.hash.toString('hex'), token]));
      await this.#flushUses();
    } catch (error) {
      // Keep the last known set: a store that cannot be read cannot have revoked anything through us either.
      this.#log.warn({ err: error }, 'token refresh failed; keeping the cached tokens');
    }
  }

  /** Resolves to the token's name; rejects with UnauthorizedError when it is unknown or revoked. */
  async authenticate(token: string): Promise<string> {
    const key = tokenHashHex(token);
    const hash = Buffer.from(key, 'hex');
    let stored = this.#refreshMs > 0 ? this.#byHash.get(key) : undefined;
    if (stored === undefined) {
      // Not cached: created since the last refresh, caching is off, or not a token at all.
      stored = await this.#store.findToken(hash);
      if (stored !== undefined && this.#refreshMs > 0) this.#byHash.set(key, stored);
    }
    if (stored === undefined || !timingSafeEqual(stored.hash, hash)) {
      throw new UnauthorizedError('invalid or revoked token', 'invalid_token');
    }
    this.#uses.set(stored.name, Date.now());
    return stored.name;
  }

  async #flushUses(): Promise<void> {
    if (this.#uses.size === 0) return;
    const uses = new Map([...this.#uses].map(([name, at]) => [name, new Date(at)]));
    this.#uses = new Map();
    await this.#store.recordTokenUse(uses);
  }
}
