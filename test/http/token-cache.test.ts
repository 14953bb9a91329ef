import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import type { Store } from '../../src/storage/store.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { DATABASES } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { newToken } from '../helpers/tokens.js';

/** Floods of unknown tokens from one address are what these tests send: throttling them (AUTH_FAILURE_LIMIT) is tested apart. */
const NOT_THROTTLED = { AUTH_FAILURE_LIMIT: '0' };

stopPostgresAfterAll();

/**
 * The token cache bounds the database work unknown tokens can cause: misses share one rate-limited reload of the
 * token map instead of a lookup each, while a token created after the last reload is still accepted at once.
 */

const INVALID_TOKEN = 'Bearer realm="plantstore", error="invalid_token"';

/** Counts the token reads the app makes from now on. */
function countTokenReads(store: Store): { find: number; all: number } {
  const counts = { find: 0, all: 0 };
  const { tokens } = store;
  const find = tokens.find.bind(tokens);
  const all = tokens.all.bind(tokens);
  tokens.find = (hash) => {
    counts.find += 1;
    return find(hash);
  };
  tokens.all = () => {
    counts.all += 1;
    return all();
  };
  return counts;
}

for (const database of DATABASES) {
  describe(`token cache on ${database.kind}`, () => {
    let nextId = 1;
    const payload = () => `{"id":${nextId++},"name":"a"}`;
    const post = (t: TestApp, authorization: string) =>
      t.app.inject({ method: 'POST', url: '/plants', headers: { ...t.headers, authorization }, payload: payload() });


    it('refuses 500 concurrent unknown tokens with 401 invalid_token after a bounded number of store reads', async (context) => {
      const t = await buildTestApp(context, database.create, NOT_THROTTLED);
      const reads = countTokenReads(t.store);
      const started = performance.now();
      const [unknown, valid] = await Promise.all([
        Promise.all(Array.from({ length: 500 }, () => post(t, `Bearer ${generateToken()}`))),
        Promise.all(Array.from({ length: 20 }, () => post(t, `Bearer ${t.token}`))),
      ]);
      const elapsedMs = performance.now() - started;
      for (const response of unknown) {
        assertErrorRecord(response, 401, /invalid or revoked/);
        assert.equal(response.headers['www-authenticate'], INVALID_TOKEN);
      }
      for (const response of valid) assert.equal(response.statusCode, 200, response.body);
      context.diagnostic(`${reads.all} reloads, ${reads.find} lookups for 500 unknown tokens in ${Math.round(elapsedMs)} ms`);
      // No lookup per token: at most one reload per 100 ms, plus one in flight and one periodic refresh.
      assert.equal(reads.find, 0);
      assert.ok(reads.all >= 1, 'an unknown token was refused without looking for a new token');
      assert.ok(reads.all <= 2 + Math.ceil(elapsedMs / 100), `${reads.all} reloads in ${Math.round(elapsedMs)} ms`);
    });

    it('accepts a token created after start on its first request, even right after a burst of unknown tokens', async (context) => {
      // A long cache period: only the miss can have found the new token.
      const t = await buildTestApp(context, database.create, { ...NOT_THROTTLED, TOKEN_CACHE_MS: '60000' });
      const reads = countTokenReads(t.store);
      const burst = Promise.all(Array.from({ length: 100 }, () => post(t, `Bearer ${generateToken()}`)));
      const token = generateToken();
      await t.store.tokens.add(newToken(`late-${randomUUID()}`, hashToken(token)));
      const [late, refused] = await Promise.all([post(t, `Bearer ${token}`), burst]);
      assert.equal(late.statusCode, 200, late.body);
      for (const response of refused) assertErrorRecord(response, 401, /invalid or revoked/);
      // Known now: the next request is a map hit.
      const before = reads.all;
      assert.equal((await post(t, `Bearer ${token}`)).statusCode, 200);
      assert.equal(reads.all, before);
      assert.ok(reads.all <= 3, `${reads.all} reloads`);
    });

    it('still refuses a revoked token within TOKEN_CACHE_MS while unknown tokens arrive', async (context) => {
      const t = await buildTestApp(context, database.create, { ...NOT_THROTTLED, TOKEN_CACHE_MS: '200' });
      assert.equal((await post(t, `Bearer ${t.token}`)).statusCode, 200);
      assert.equal(await t.store.tokens.revoke(t.tokenName), true);
      const flood = Promise.all(Array.from({ length: 50 }, () => post(t, `Bearer ${generateToken()}`)));
      await new Promise((resolve) => setTimeout(resolve, 500));
      const response = await post(t, `Bearer ${t.token}`);
      assertErrorRecord(response, 401, /invalid or revoked/);
      assert.equal(response.headers['www-authenticate'], INVALID_TOKEN);
      for (const refused of await flood) assertErrorRecord(refused, 401);
    });

    it('answers 503 to an unknown token while the tokens cannot be read, and keeps accepting cached ones', async (context) => {
      const t = await buildTestApp(context, database.create, NOT_THROTTLED);
      const all = t.store.tokens.all.bind(t.store.tokens);
      let reads = 0;
      t.store.tokens.all = () => {
        reads += 1;
        return Promise.reject(new StorageUnavailableError('storage is unavailable; retry shortly'));
      };
      const responses = await Promise.all(Array.from({ length: 100 }, () => post(t, `Bearer ${generateToken()}`)));
      for (const response of responses) assertErrorRecord(response, 503, /^storage is unavailable; retry shortly$/);
      assert.ok(reads >= 1 && reads <= 3, `${reads} reloads`);
      assert.equal((await post(t, `Bearer ${t.token}`)).statusCode, 200);
      t.store.tokens.all = all;
      assertErrorRecord(await post(t, `Bearer ${generateToken()}`), 401, /invalid or revoked/);
    });

    it('asks the store on every request when TOKEN_CACHE_MS is 0', async (context) => {
      const t = await buildTestApp(context, database.create, { ...NOT_THROTTLED, TOKEN_CACHE_MS: '0' });
      const reads = countTokenReads(t.store);
      for (const response of await Promise.all(Array.from({ length: 10 }, () => post(t, `Bearer ${generateToken()}`)))) {
        assertErrorRecord(response, 401, /invalid or revoked/);
      }
      assert.equal((await post(t, `Bearer ${t.token}`)).statusCode, 200);
      assert.deepEqual(reads, { find: 11, all: 0 });
      // Revocation is immediate.
      assert.equal(await t.store.tokens.revoke(t.tokenName), true);
      assertErrorRecord(await post(t, `Bearer ${t.token}`), 401);
    });
  });
}
