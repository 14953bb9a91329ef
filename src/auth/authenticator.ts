import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { TokenLookup } from '../storage/token-store.js';
import { toCached, type CachedToken } from './cached-token.js';
import { ExpiredTokenError, InvalidTokenError, MissingScopeError } from './errors.js';
import type { Scope } from './scopes.js';
import { TokenWatches, type TokenWatch } from './token-watch.js';
import { tokenHashHex } from './tokens.js';

// A long request's TokenWatch is part of what authenticate's callers use, so it is named here too.
export type { TokenWatch } from './token-watch.js';

/** What the token cache reports (src/observability/metrics.ts implements it): each reload of the token map, and how it went. */
export interface TokenCacheObserver {
  tokenCacheReloaded(result: 'success' | 'failure'): void;
}

const UNOBSERVED: TokenCacheObserver = { tokenCacheReloaded: () => undefined };

type ReloadOutcome = { readonly ok: true } | { readonly ok: false; readonly error: unknown };

/** At most this many presented tokens are remembered by their text between reloads (TokenAuthenticator.#byToken). */
const TOKENS_REMEMBERED = 1024;

/** Reloads of the token map are spaced at least this far apart (or `TOKEN_CACHE_MS`, when that is shorter). */
const RELOAD_SPACING_MS = 100;

export interface TokenAuthenticatorOptions {
  /** TOKEN_CACHE_MS: how often the token map is reloaded; 0 asks the store on every request. */
  readonly refreshMs: number;
  readonly log: Logger;
  readonly observer?: TokenCacheObserver;
  /** The wall clock expiry is compared with, in milliseconds since the epoch (Date.now); tests pass one they move by hand. */
  readonly now?: () => number;
}

/**
 * Checks tokens against the store through a cache of every stored token's hash, scopes and expiry, reloaded every
 * `refreshMs`: the hot path is one map lookup and two comparisons, and a revocation (by any replica or the CLI)
 * takes effect within one refresh. A token is hashed on its first use after each reload; until the next, its text
 * finds it. That keeps a stored token's text in memory for at most one refresh after it was last sent, which the
 * request that sent it held anyway (its headers live as long as the request, and a keep-alive connection's buffers
 * longer): no token is kept that no client sent, and none is written anywhere. Expiry is compared with the clock on every request, so an expired token is
 * refused from its expiry on, whenever the map was last reloaded. Last use is recorded in memory and written with the
 * periodic refresh, never on the request path.
 *
 * A hash not in the map may be a token created since the last reload, so the request waits for a reload that starts
 * after it arrived and looks again. Reloads are single-flight and rate-limited: at most one is in flight, the next is
 * shared by every miss (and timer tick) that arrives meanwhile, and it starts no sooner than `RELOAD_SPACING_MS`
 * after the previous one started. However many unknown tokens arrive, the store sees at most one reload per
 * spacing, and a new token is still accepted on its first use. With `refreshMs` 0 (caching off) every request asks
 * the store, as the operator chose.
 */
export class TokenAuthenticator {
  readonly #tokens: TokenLookup;
  readonly #refreshMs: number;
  readonly #spacingMs: number;
  readonly #log: Logger;
  readonly #observer: TokenCacheObserver;
  readonly #now: () => number;
  #byHash = new Map<string, CachedToken>();
  /**
   * The tokens presented since the last reload that are in #byHash, by their text: a token a client sends again is
   * found without hashing it. Emptied at every reload (#byHash is replaced then, so a revoked token leaves both at
   * once), and never holds a token that is not a stored one, so unknown tokens cannot fill it. A lookup compares the
   * presented text with a key only when their lengths and string hashes (V8's, seeded per process) are equal, so its
   * timing tells no more of a stored token than the digest map's does.
   */
  #byToken = new Map<string, CachedToken>();
  #uses = new Map<string, number>();
  /** The last write of uses, settled either way: the next write starts after it (see #flushUses). */
  #writing: Promise<void> = Promise.resolve();
  /** Why a write of uses failed once stop() had been called, if one did. */
  #failedWhileStopping: unknown;
  #timer: NodeJS.Timeout | undefined;
  /** The latest reload, and the one that has not yet read the store (every miss meanwhile shares it), if any. */
  #latest: Promise<ReloadOutcome> = Promise.resolve({ ok: true });
  #queued: Promise<ReloadOutcome> | undefined;
  #lastReloadStart = -Infinity;
  #stopped = false;
  /** The long requests (event streams, bulk creates) open with a token: re-checked at each reload and at their expiry. */
  readonly #watches: TokenWatches;

  constructor(tokens: TokenLookup, options: TokenAuthenticatorOptions) {
    this.#tokens = tokens;
    this.#refreshMs = options.refreshMs;
    this.#spacingMs = Math.min(RELOAD_SPACING_MS, options.refreshMs);
    this.#log = options.log;
    this.#observer = options.observer ?? UNOBSERVED;
    this.#now = options.now ?? Date.now;
    this.#watches = new TokenWatches(tokens, options.refreshMs, this.#now);
  }

  async start(): Promise<void> {
    await this.refresh();
    if (this.#refreshMs > 0) {
      this.#timer = setInterval(() => void this.refresh(), this.#refreshMs);
      this.#timer.unref();
    }
  }

  /**
   * Never rejects: last-use times are bookkeeping, and storage that cannot take them must not fail a shutdown. Resolves
   * only once no write of uses is in flight, so the store can be closed after it. The final write carries the uses
   * recorded since the last write and those of writes that failed earlier; but when a write in flight at the stop (a
   * refresh's) fails, none follows it: the store has just refused one for as long as it waits for a lock, and a second
   * such wait would double the shutdown (SHUTDOWN_TIMEOUT_MS).
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#watches.stop();
    await this.#latest;
    await this.#writing;
    if (this.#failedWhileStopping !== undefined) {
      this.#log.warn({ err: this.#failedWhileStopping }, 'recording token use failed at shutdown; the last uses since the previous refresh are not kept');
      return;
    }
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
   * Resolves to the token's name when it may do what `scope` allows. Rejects with InvalidTokenError when the token is
   * unknown or revoked, ExpiredTokenError when its expiry has passed, MissingScopeError when it does not hold `scope`,
   * or with the store's error when that cannot be told (the tokens cannot be read and it is not in the cache).
   */
  authenticate(token: string, scope: Scope): Promise<string> {
    try {
      return Promise.resolve(this.check(token, scope));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * authenticate's answer, decided at once when the token is cached: its name, or the refusal thrown. Only a token
   * the cache does not hold (or caching off) needs the store, and gets a promise.
   */
  check(token: string, scope: Scope): string | Promise<string> {
    if (this.#refreshMs === 0) return this.#lookUp(tokenHashHex(token), scope);
    const known = this.#byToken.get(token);
    if (known !== undefined) return this.#admit(known, scope);
    const key = tokenHashHex(token);
    const cached = this.#byHash.get(key);
    if (cached === undefined) return this.#lookUp(key, scope);
    if (this.#byToken.size >= TOKENS_REMEMBERED) this.#byToken.clear();
    this.#byToken.set(token, cached);
    return this.#admit(cached, scope);
  }

  /**
   * Watches `token`, which a long request was just admitted with for `scope`: `onRefused` is called once, when the
   * token is refused from then on (revoked, expired, or without the scope), at the first reload of the token map
   * after the change (so within `refreshMs`), or at its expiry by a timer (./token-watch.ts).
   */
  watch(token: string, scope: Scope, onRefused: (error: Error) => void): TokenWatch {
    return this.#watches.watch(token, scope, onRefused, this.#byHash);
  }

  /** A token not in the cache: asked of the store when caching is off, otherwise looked for again after a reload. */
  async #lookUp(key: string, scope: Scope): Promise<string> {
    let cached: CachedToken | undefined;
    if (this.#refreshMs === 0) {
      const stored = await this.#tokens.find(Buffer.from(key, 'hex'));
      cached = stored && toCached(stored);
    } else {
      // Created since the last reload, or not a token at all: one shared, rate-limited reload decides.
      const outcome = await this.#reload();
      cached = this.#byHash.get(key);
      // Unverifiable, not invalid, while the store cannot be read: its error is the answer.
      if (cached === undefined && !outcome.ok) throw outcome.error;
    }
    if (cached === undefined) throw new InvalidTokenError();
    return this.#admit(cached, scope);
  }

  /**
   * The name of `cached` if it may do what `scope` allows now; throws why not otherwise. `cached` was found by the
   * presented token's SHA-256 (the map's key, or the store's WHERE hash =), so that lookup is the comparison of the
   * token with the stored one: there is none left to make here. It needs no constant time: what a lookup's timing
   * could tell is how much of a digest matched, and no one can choose a token by its digest's first bytes.
   */
  #admit(cached: CachedToken, scope: Scope): string {
    const now = this.#now();
    if (now >= cached.expiresAtMs) throw new ExpiredTokenError();
    // A valid token refused for its scope was still used: the operator deciding whether to revoke it should know.
    this.#uses.set(cached.name, now);
    if (!cached.scopes.has(scope)) throw new MissingScopeError(scope);
    return cached.name;
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
      const tokens = await this.#tokens.all();
      this.#byHash = new Map(tokens.map((token) => [token.hash.toString('hex'), toCached(token)]));
      this.#byToken = new Map();
      this.#observer.tokenCacheReloaded('success');
      this.#watches.recheckAll(this.#byHash);
      return { ok: true };
    } catch (error) {
      // Keep the last known set: a store that cannot be read cannot have revoked anything through us either.
      this.#log.warn({ err: error }, 'token refresh failed; keeping the cached tokens');
      this.#observer.tokenCacheReloaded('failure');
      return { ok: false, error };
    }
  }

  /**
   * Writes the uses recorded so far, after any write still in flight (one at a time, so a later write never passes an
   * earlier one, and stop() can wait for the last). Uses whose write fails are put back for the next.
   */
  #flushUses(): Promise<void> {
    const write = this.#writing.then(() => this.#writeUses());
    this.#writing = write.catch(() => undefined);
    return write;
  }

  async #writeUses(): Promise<void> {
    if (this.#uses.size === 0) return;
    const uses = this.#uses;
    this.#uses = new Map();
    try {
      await this.#tokens.recordUse(new Map([...uses].map(([name, at]) => [name, new Date(at)])));
    } catch (error) {
      if (this.#stopped) this.#failedWhileStopping ??= error;
      // A token used again since keeps its later time (the store only ever moves a last use forward anyway).
      for (const [name, at] of uses) {
        if ((this.#uses.get(name) ?? -Infinity) < at) this.#uses.set(name, at);
      }
      throw error;
    }
  }
}
