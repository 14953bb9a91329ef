/**
 * TokenAuthenticator.watch (src/auth/token-watch.ts): a long request's token is refused once, at the first reload
 * that finds it revoked or without the scope, at its expiry (check() compares with the clock; a timer calls back),
 * and never from within watch() itself. Against tokens in memory the test changes by hand; reloads are asked for by
 * the test.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { pino } from 'pino';
import { TokenAuthenticator } from '../../src/auth/authenticator.js';
import { ExpiredTokenError, InvalidTokenError, MissingScopeError } from '../../src/auth/errors.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import type { StoredToken, TokenLookup } from '../../src/storage/token-store.js';

class MemoryTokens implements TokenLookup {
  tokens: StoredToken[] = [];
  finds = 0;
  find(hash: Buffer): Promise<StoredToken | undefined> {
    this.finds += 1;
    return Promise.resolve(this.tokens.find((token) => token.hash.equals(hash)));
  }
  all(): Promise<StoredToken[]> {
    return Promise.resolve([...this.tokens]);
  }
  recordUse(): Promise<void> {
    return Promise.resolve();
  }
}

function stored(name: string, token: string, options: { scopes?: readonly string[]; expiresAt?: Date } = {}): StoredToken {
  return { name, hash: hashToken(token), scopes: options.scopes ?? SCOPES, expiresAt: options.expiresAt ?? null } as StoredToken;
}

async function started(tokens: MemoryTokens, refreshMs: number, now?: () => number): Promise<TokenAuthenticator> {
  const authenticator = new TokenAuthenticator(tokens, { refreshMs, log: pino({ level: 'silent' }), ...(now ? { now } : {}) });
  await authenticator.start();
  return authenticator;
}

describe('TokenAuthenticator.watch', () => {
  it('refuses a watched token once, at the first reload that no longer finds it; others are left alone', async () => {
    const tokens = new MemoryTokens();
    const [kept, revoked] = [generateToken(), generateToken()];
    tokens.tokens = [stored('kept', kept), stored('revoked', revoked)];
    const authenticator = await started(tokens, 60_000);
    const refusals: Array<[string, Error]> = [];
    const keptWatch = authenticator.watch(kept, 'plants:read', (error) => refusals.push(['kept', error]));
    const watch = authenticator.watch(revoked, 'plants:read', (error) => refusals.push(['revoked', error]));
    await authenticator.refresh();
    assert.equal(refusals.length, 0);
    tokens.tokens = [stored('kept', kept)];
    await authenticator.refresh();
    await turn();
    assert.equal(refusals.length, 1);
    assert.equal(refusals[0]?.[0], 'revoked');
    assert.ok(refusals[0]?.[1] instanceof InvalidTokenError);
    assert.ok(watch.check() instanceof InvalidTokenError);
    assert.equal(keptWatch.check(), undefined);
    await authenticator.refresh();
    await turn();
    assert.equal(refusals.length, 1);
    keptWatch.stop();
    await authenticator.stop();
  });

  it('refuses a token without the scope after watch() returns, and an expired one by the clock and by its timer', async () => {
    const tokens = new MemoryTokens();
    const [reader, expiring] = [generateToken(), generateToken()];
    let now = Date.now();
    tokens.tokens = [stored('reader', reader, { scopes: ['plants:read'] }), stored('expiring', expiring, { expiresAt: new Date(now + 30) })];
    const authenticator = await started(tokens, 60_000, () => now);
    const refusals: Error[] = [];
    authenticator.watch(reader, 'plants:create', (error) => refusals.push(error));
    assert.equal(refusals.length, 0, 'not from within watch()');
    await turn();
    assert.ok(refusals[0] instanceof MissingScopeError);
    const expired: Error[] = [];
    const watch = authenticator.watch(expiring, 'plants:read', (error) => expired.push(error));
    assert.equal(watch.check(), undefined);
    now += 30;
    assert.ok(watch.check() instanceof ExpiredTokenError);
    await turn();
    assert.equal(expired.length, 1);
    assert.ok(expired[0] instanceof ExpiredTokenError);
    // The timer, with the clock past the expiry: a second watch on the same token is refused without a check().
    const byTimer = new Promise<Error>((resolve) => authenticator.watch(expiring, 'plants:read', resolve));
    assert.ok((await byTimer) instanceof ExpiredTokenError);
    await authenticator.stop();
  });

  it('with the cache off, looks each distinct watched token up in the store, not each request', async () => {
    const tokens = new MemoryTokens();
    const token = generateToken();
    tokens.tokens = [stored('one', token)];
    const authenticator = await started(tokens, 0);
    const refused = new Promise<Error>((resolve) => {
      for (let index = 0; index < 3; index += 1) authenticator.watch(token, 'plants:read', resolve);
    });
    await turn();
    const before = tokens.finds;
    tokens.tokens = [];
    const error = await refused;
    assert.ok(error instanceof InvalidTokenError);
    // One periodic recheck covered all three watchers of the one token.
    assert.equal(tokens.finds - before, 1);
    await authenticator.stop();
  });
});
