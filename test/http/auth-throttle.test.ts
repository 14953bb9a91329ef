/**
 * Failed authentication is throttled per client address (AUTH_FAILURE_LIMIT, request.ip, so behind TRUST_PROXY the
 * client's): past the limit a failing request is answered 429 with Retry-After instead of 401/403, and counted; a
 * valid token from the same address is answered all the same. In-process, app.inject's remoteAddress standing for
 * the connection's peer, and a clock moved by hand.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { AuthFailureThrottle } from '../../src/http/rate-limit.js';
import { buildTestApp, useTestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { FakeClock } from '../helpers/clock.js';
import { sqliteDatabase } from '../helpers/databases.js';
import { parsePrometheusText } from '../helpers/prometheus.js';
import { newToken } from '../helpers/tokens.js';

const LIMIT = 5;
const UNKNOWN = { authorization: 'Bearer plst_not-a-token-of-this-database' };

describe(`AUTH_FAILURE_LIMIT=${LIMIT}`, () => {
  const clock = new FakeClock(1_000_000);
  const t = useTestApp(sqliteDatabase, { AUTH_FAILURE_LIMIT: String(LIMIT), TRUST_PROXY: '10.0.0.1', METRICS_CACHE_MS: '0' }, { now: clock.now });
  const readOnly = generateToken();

  before(() => t.store.tokens.add(newToken(`read-only-${randomUUID()}`, hashToken(readOnly), { scopes: ['plants:read'] })));

  const list = (remoteAddress: string, headers: Record<string, string> = UNKNOWN) => t.app.inject({ method: 'GET', url: '/plants', remoteAddress, headers });

  it('answers 401 up to the limit, then 429 with Retry-After, an Error record, for every further failure from the address', async () => {
    for (let attempt = 0; attempt < LIMIT; attempt += 1) assertErrorRecord(await list('192.0.2.1'), 401);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const response = await list('192.0.2.1');
      assertErrorRecord(response, 429, /^too many failed authentications from this address; retry after \d+ s$/);
      const retryAfter = Number(response.headers['retry-after']);
      // One failure is earned back every 60 s / LIMIT.
      assert.ok(retryAfter >= 1 && retryAfter <= 60 / LIMIT, `Retry-After ${String(response.headers['retry-after'])}`);
      assert.equal(response.headers['www-authenticate'], undefined);
    }
    // A missing header, a malformed one and a token without the scope are failures too.
    assertErrorRecord(await list('192.0.2.1', {}), 429);
    assertErrorRecord(await list('192.0.2.1', { authorization: 'Bearer a b' }), 429);
    assertErrorRecord(await t.app.inject({ method: 'POST', url: '/plants', remoteAddress: '192.0.2.1', headers: { authorization: `Bearer ${readOnly}` } }), 429);
  });

  it('still answers a valid token from that address: only failing attempts are throttled', async () => {
    const response = await list('192.0.2.1', t.headers);
    assert.equal(response.statusCode, 200, response.body);
    assertErrorRecord(await list('192.0.2.1'), 429);
  });

  it('keeps other addresses apart: another client fails with 401 as before', async () => {
    assertErrorRecord(await list('192.0.2.2'), 401);
  });

  it('behind a trusted proxy, throttles each forwarded client apart, and never the clients with valid tokens', async () => {
    const proxied = (client: string, headers: Record<string, string> = UNKNOWN) => list('10.0.0.1', { ...headers, 'x-forwarded-for': client });
    for (let attempt = 0; attempt < LIMIT; attempt += 1) assertErrorRecord(await proxied('198.51.100.7'), 401);
    assertErrorRecord(await proxied('198.51.100.7'), 429);
    // Another client behind the same proxy: its failures are its own, and its valid token is answered.
    assertErrorRecord(await proxied('198.51.100.8'), 401);
    assert.equal((await proxied('198.51.100.8', t.headers)).statusCode, 200);
    assert.equal((await proxied('198.51.100.7', t.headers)).statusCode, 200);
  });

  it('refills: after 60 s / limit one more failure is answered 401 again', async () => {
    assertErrorRecord(await list('192.0.2.1'), 429);
    clock.advance(60_000 / LIMIT);
    assertErrorRecord(await list('192.0.2.1'), 401);
    assertErrorRecord(await list('192.0.2.1'), 429);
  });

  it('counts failures in plantstore_auth_failures_total by outcome', async () => {
    const scrape = async () => {
      const response = await t.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '192.0.2.50', headers: { authorization: `Bearer ${t.token}` } });
      assert.equal(response.statusCode, 200, response.body);
      return parsePrometheusText(response.body);
    };
    const before = await scrape();
    assertErrorRecord(await list('192.0.2.1'), 429);
    assertErrorRecord(await list('192.0.2.3'), 401);
    const after = await scrape();
    const moved = (outcome: string) =>
      (after.value('plantstore_auth_failures_total', { outcome }) ?? 0) - (before.value('plantstore_auth_failures_total', { outcome }) ?? 0);
    assert.equal(moved('throttled'), 1);
    assert.equal(moved('refused'), 1);
  });
});

describe('AUTH_FAILURE_LIMIT=0', () => {
  it('turns throttling off: every failure is a 401', async (context) => {
    const t = await buildTestApp(context, sqliteDatabase, { AUTH_FAILURE_LIMIT: '0' });
    // Without a token at all, so that no token reload (spaced 100 ms apart) slows the loop.
    for (let attempt = 0; attempt < 100; attempt += 1) {
      assertErrorRecord(await t.app.inject({ method: 'GET', url: '/plants', remoteAddress: '192.0.2.1' }), 401);
    }
  });
});

describe('the per-address table', () => {
  it('holds a fixed number of buckets: a million addresses change nothing of its size, and addresses that meet only share a stricter limit', () => {
    const clock = new FakeClock();
    const throttle = new AuthFailureThrottle(2, clock.now, 8);
    // With 8 buckets, 2 failures each, 16 failures fill every bucket whatever the addresses.
    let throttled = 0;
    for (let index = 0; index < 1_000_000; index += 1) if (throttle.failed(`2001:db8::${index.toString(16)}`) !== undefined) throttled += 1;
    assert.ok(throttled >= 1_000_000 - 16, String(throttled));
  });
});
