import { timingSafeEqual } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { StoredToken, TokenStore } from '../storage/store.js';
import { tokenHashHex } from './tokens.js';

/** The token is not one of the valid tokens: unknown, or revoked. */
export class InvalidTokenError extends Error {
  constructor() {
    super('invalid or revoked token');
    this.name = 'InvalidTokenError';
  }
}


/** What the token cache reports (src/metrics.ts implements it): each reload of the token map, and how it went. */
export interface TokenCacheObserver {
  tokenCacheReloaded(result: 'success' | 'failure'): void;
}

const UNOBSERVED: TokenCacheObserver = { tokenCacheReloaded: () => undefined };

type ReloadOutcome = { readonly ok: true } | { readonly ok: false; readonly error: unknown };

/** Reloads of the token map are spaced at least this far apart (or `TOKEN_CACHE_MS`, when that is shorter). */
const RELOAD_SPACING_MS = 100;

/**
 * Checks tokens against the store through a cache of every valid token's hash, reloaded every `refreshMs`:
 * the hot path is one hash and one map lookup, and a revocation (by any instance or the CLI) takes effect within
 * one refresh. Last use is recorded in memory and written with the periodic refresh, never on the request path.
 *
 * A hash not in the map may be a token created since the last reload, so the request waits for a reload that starts
 * after it arrived and looks again. Reloads are single-flight and rate-limited: at most one is in flight, the next is
 * shared by every miss (and timer tick) that arrives meanwhile, and it starts no sooner than `RELOAD_SPACING_MS`
 * after the previous one started. However many unknown tokens arrive, the store sees at most one reload per
 * spacing, and a new token is still accepted on its first use. With `refreshMs` 0 (caching off) every request asks
 * the store, as the operator chose.
 */
export class TokenAuthenticator {
  readonly #store: TokenStore;
  readonly #refreshMs: number;
  readonly #spacingMs: number;
  readonly #log: Logger;
  readonly #observer: TokenCacheObserver;
  #byHash = new Map<string, StoredToken>();
  #uses = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  /** The latest reload, and the one that has not yet read the store (every miss meanwhile shares it), if any. */
  #latest: Promise<ReloadOutcome> = Promise.resolve({ ok: true });
  #queued: Promise<ReloadOutcome> | undefined;
  #lastReloadStart = -Infinity;
  #stopped = false;

  constructor(store: TokenStore, refreshMs: number, log: Logger, observer: TokenCacheObserver = UNOBSERVED) {
    this.#store = store;
    this.#refreshMs = refreshMs;
    this.#spacingMs = Math.min(RELOAD_SPACING_MS, refreshMs);
    this.#log = log;
    this.#observer = observer;
  }

  async start(): Promise<void> {
    await this.refresh();
    if (this.#refreshMs > 0) {
      this.#timer = setInterval(() => void this.refresh(), this.#refreshMs);
      this.#timer.unref();
    }
  }

  /** Never rejects: last-use times are bookkeeping, and storage that cannot take them must not fail a shutdown. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#latest;
    try {
      await this.#flushUses();
    } catch (error) {
      this.#log.warn({ err: error }, 'recording token use failed at shutdown; the last uses since the previous refresh are not kept');
    }
  }

  /** Reloads the token map (sharing a queued reload, if there is one), then writes the recorded last uses. */
  async refresh(): Promise<void> {
    // A store that cannot be read is not written to either: the uses wait for the next refresh.
    if (!(await this.#reload()).ok) return;
    try {
      await this.#flushUses();
    } catch (error) {
      this.#log.warn({ err: error }, 'recording token use failed');
    }
  }

  /**
   * Resolves to the token's name; rejects with InvalidTokenError when it is unknown or revoked, or with the store's
   * error when it cannot be told (the tokens cannot be read and it is not in the cache).
   */
  async authenticate(token: string): Promise<string> {
    const key = tokenHashHex(token);
    const hash = Buffer.from(key, 'hex');
    let stored: StoredToken | undefined;
    if (this.#refreshMs === 0) {
      stored = await this.#store.findToken(hash);
    } else {
      stored = this.#byHash.get(key);
      if (stored === undefined) {
        // Created since the last reload, or not a token at all: one shared, rate-limited reload decides.
        const outcome = await this.#reload();
        stored = this.#byHash.get(key);
        // Unverifiable, not invalid, while the store cannot be read: its error is the answer.
        if (stored === undefined && !outcome.ok) throw outcome.error;
      }
    }
    if (stored === undefined || !timingSafeEqual(stored.hash, hash)) {
      throw new InvalidTokenError();
    }
    this.#uses.set(stored.name, Date.now());
    return stored.name;
  }

  /**
   * Settles after a reload that reads the store after this call; never rejects (a failure keeps the cached tokens).
   */
  #reload(): Promise<ReloadOutcome> {
    if (this.#queued === undefined) {
      this.#queued = this.#reloadAfter(this.#latest);
      this.#latest = this.#queued;
    }
    return this.#queued;
  }

  async #reloadAfter(previous: Promise<ReloadOutcome>): Promise<ReloadOutcome> {
    await previous;
    const wait = this.#lastReloadStart + this.#spacingMs - performance.now();
    if (wait > 0) await sleep(wait);
    // This reload is the queued one until here; misses from now on queue the next.
    this.#queued = undefined;
    this.#lastReloadStart = performance.now();
    return this.#stopped ? { ok: true } : this.#load();
  }

  async #load(): Promise<ReloadOutcome> {
    try {
      const tokens = await this.#store.allTokens();
      this.#byHash = new Map(tokens.map((token) => [token.hash.toString('hex'), token]));
      this.#observer.tokenCacheReloaded('success');
      return { ok: true };
    } catch (error) {
      // Keep the last known set: a store that cannot be read cannot have revoked anything through us either.
      this.#log.warn({ err: error }, 'token refresh failed; keeping the cached tokens');
      this.#observer.tokenCacheReloaded('failure');
      return { ok: false, error };
    }
  }

  async #flushUses(): Promise<void> {
    if (this.#uses.size === 0) return;
    const uses = new Map([...this.#uses].map(([name, at]) => [name, new Date(at)]));
    this.#uses = new Map();
    await this.#store.recordTokenUse(uses);
  }
}
