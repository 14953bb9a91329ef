import type { StoredToken, TokenLookup } from '../storage/token-store.js';
import { toCached, type CachedToken } from './cached-token.js';
import { ExpiredTokenError, InvalidTokenError, MissingScopeError } from './errors.js';
import type { Scope } from './scopes.js';
import { tokenHashHex } from './tokens.js';

/** How often open long requests' tokens are looked up again when the cache is off (TOKEN_CACHE_MS 0). */
const UNCACHED_RECHECK_MS = 1000;
/** The longest a Node timer waits; an expiry further off is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A long request's hold on the token it was authenticated with (TokenAuthenticator.watch): told once, and at most
 * within one refresh, when the token is refused from then on.
 */
export interface TokenWatch {
  /** Why the token is refused now, if it is (its expiry compared with the clock, its revocation as last loaded). */
  check(): Error | undefined;
  /** Stops watching; the request has ended. */
  stop(): void;
}

interface Watcher {
  readonly key: string;
  readonly scope: Scope;
  readonly onRefused: (error: Error) => void;
  refused: Error | undefined;
  expiresAtMs: number;
  expiryTimer: NodeJS.Timeout | undefined;
}

/**
 * The long requests (event streams, bulk creates) open with a token, for TokenAuthenticator.watch: each is re-checked
 * at every reload of the token map (recheckAll) and at its token's expiry, and with the cache off looked up again
 * every UNCACHED_RECHECK_MS.
 */
export class TokenWatches {
  readonly #tokens: Pick<TokenLookup, 'find'>;
  readonly #refreshMs: number;
  readonly #now: () => number;
  readonly #watchers = new Set<Watcher>();
  #uncachedRecheck: NodeJS.Timeout | undefined;

  constructor(tokens: Pick<TokenLookup, 'find'>, refreshMs: number, now: () => number) {
    this.#tokens = tokens;
    this.#refreshMs = refreshMs;
    this.#now = now;
  }

  /**
   * Watches `token`, which a long request was just admitted with for `scope`: `onRefused` is called once, when the
   * token is refused from then on (revoked, expired, or without the scope), at the first reload of the token map
   * after the change (so within `refreshMs`), or at its expiry by a timer. Short requests never pay for this: only
   * the requests that outlast a refresh watch their token, and a reload checks each of them with one map lookup.
   */
  watch(token: string, scope: Scope, onRefused: (error: Error) => void, byHash: ReadonlyMap<string, CachedToken>): TokenWatch {
    const watcher: Watcher = { key: tokenHashHex(token), scope, onRefused, refused: undefined, expiresAtMs: Infinity, expiryTimer: undefined };
    this.#watchers.add(watcher);
    if (this.#refreshMs === 0) {
      this.#uncachedRecheck ??= setInterval(() => void this.#recheckUncached(), UNCACHED_RECHECK_MS).unref();
      void this.#recheckUncached([watcher]);
    } else {
      this.#recheck(watcher, byHash.get(watcher.key));
    }
    return {
      check: () => {
        if (watcher.refused === undefined && this.#now() >= watcher.expiresAtMs) this.#refuse(watcher, new ExpiredTokenError());
        return watcher.refused;
      },
      stop: () => this.#unwatch(watcher),
    };
  }

  #unwatch(watcher: Watcher): void {
    clearTimeout(watcher.expiryTimer);
    this.#watchers.delete(watcher);
    if (this.#watchers.size === 0) {
      clearInterval(this.#uncachedRecheck);
      this.#uncachedRecheck = undefined;
    }
  }

  /** Refuses the watcher's request if its token, as now known, would be refused; otherwise arms its expiry timer. */
  #recheck(watcher: Watcher, cached: CachedToken | undefined): void {
    if (watcher.refused !== undefined) return;
    if (cached === undefined) return this.#refuse(watcher, new InvalidTokenError());
    if (this.#now() >= cached.expiresAtMs) return this.#refuse(watcher, new ExpiredTokenError());
    if (!cached.scopes.has(watcher.scope)) return this.#refuse(watcher, new MissingScopeError(watcher.scope));
    if (cached.expiresAtMs !== watcher.expiresAtMs) {
      watcher.expiresAtMs = cached.expiresAtMs;
      clearTimeout(watcher.expiryTimer);
      watcher.expiryTimer = undefined;
      if (cached.expiresAtMs !== Infinity) this.#armExpiry(watcher);
    }
  }

  #armExpiry(watcher: Watcher): void {
    const waitMs = Math.min(MAX_TIMER_MS, Math.max(0, watcher.expiresAtMs - this.#now()));
    watcher.expiryTimer = setTimeout(() => {
      watcher.expiryTimer = undefined;
      if (this.#now() >= watcher.expiresAtMs) this.#refuse(watcher, new ExpiredTokenError());
      else this.#armExpiry(watcher);
    }, waitMs);
    watcher.expiryTimer.unref();
  }

  #refuse(watcher: Watcher, error: Error): void {
    if (watcher.refused !== undefined) return;
    watcher.refused = error;
    this.#unwatch(watcher);
    // Never from within watch() itself: the caller has its handle before it hears of a refusal.
    queueMicrotask(() => watcher.onRefused(error));
  }

  /** With the cache off: each distinct token watched, looked up once; a store that cannot be read refuses nothing. */
  async #recheckUncached(watchers: Iterable<Watcher> = this.#watchers): Promise<void> {
    const byKey = new Map<string, Watcher[]>();
    for (const watcher of watchers) byKey.set(watcher.key, [...(byKey.get(watcher.key) ?? []), watcher]);
    for (const [key, group] of byKey) {
      let stored: StoredToken | undefined;
      try {
        stored = await this.#tokens.find(Buffer.from(key, 'hex'));
      } catch {
        continue;
      }
      const cached = stored && toCached(stored);
      for (const watcher of group) if (this.#watchers.has(watcher)) this.#recheck(watcher, cached);
    }
  }

  /** Checks every watched token against the token map just loaded. */
  recheckAll(byHash: ReadonlyMap<string, CachedToken>): void {
    for (const watcher of [...this.#watchers]) this.#recheck(watcher, byHash.get(watcher.key));
  }

  /** Stops every watch, calling back none. */
  stop(): void {
    clearInterval(this.#uncachedRecheck);
    for (const watcher of this.#watchers) clearTimeout(watcher.expiryTimer);
    this.#watchers.clear();
  }
}
