/**
 * Per-token rate limiting (RATE_LIMIT_MAX per RATE_LIMIT_WINDOW_MS): what any limiter must do (429 + Retry-After per
 * token, after authentication, before the body; off by default), and how this one does it, as a token bucket:
 * RATE_LIMIT_BURST requests at once, then RATE_LIMIT_MAX per RATE_LIMIT_WINDOW_MS. The buckets run on a FakeClock: a
 * test moves time on by hand instead of sleeping through it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { FakeClock } from '../helpers/clock.js';
import { sqliteDatabase } from '../helpers/databases.js';
import { newToken } from '../helpers/tokens.js';

describe('per-token rate limiting', () => {
  let nextId = 1;
  const plant = () => `{"id":${nextId++},"name":"Burst","tag":"load"}`;

  it('answers 429 with Retry-After and an Error record past RATE_LIMIT_MAX, per token, before reading the body', async (context) => {
    const t = await buildTestApp(context, sqliteDatabase, { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_MS: '60000' });
    const other = generateToken();
    await t.store.tokens.add(newToken(`other-${nextId}`, hashToken(other)));
    const post = (headers: Record<string, string>, payload = plant()) =>
      t.app.inject({ method: 'POST', url: '/plants', headers, payload });
    for (let i = 0; i < 3; i += 1) assert.equal((await post(t.headers)).statusCode, 200);
    const limited = await post(t.headers);
    assertErrorRecord(limited, 429, /rate limit exceeded; retry after \d+ s/);
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    // Limited before the body is parsed: an invalid body is still a 429, and reads are limited too.
    assertErrorRecord(await post(t.headers, '{"id":'), 429);
    assertErrorRecord(await t.app.inject({ method: 'GET', url: '/plants', headers: t.headers }), 429);
    // Another token has its own allowance.
    const otherHeaders = { ...t.headers, authorization: `Bearer ${other}` };
    for (let i = 0; i < 3; i += 1) assert.equal((await post(otherHeaders)).statusCode, 200);
    assertErrorRecord(await post(otherHeaders), 429);
    // Authentication comes first: an unknown token is 401, never counted or limited.
    const unknown = await post({ ...t.headers, authorization: `Bearer ${generateToken()}` });
    assertErrorRecord(unknown, 401);
    // Unauthenticated system routes are not limited.
    for (let i = 0; i < 5; i += 1) assert.equal((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  });

  it('lets the token through again once the window has passed', async (context) => {
    const clock = new FakeClock();
    const t = await buildTestApp(context, sqliteDatabase, { RATE_LIMIT_MAX: '2', RATE_LIMIT_WINDOW_MS: '300' }, { now: clock.now });
    const post = () => t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: plant() });
    assert.equal((await post()).statusCode, 200);
    assert.equal((await post()).statusCode, 200);
    assertErrorRecord(await post(), 429);
    clock.advance(1000);
    assert.equal((await post()).statusCode, 200);
  });

  it('is off by default', async (context) => {
    const t = await buildTestApp(context, sqliteDatabase);
    assert.equal(t.config.rateLimit, null);
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: plant() })),
    );
    assert.deepEqual(new Set(responses.map((response) => response.statusCode)), new Set([200]));
    assert.equal(responses[0]?.headers['x-ratelimit-limit'], undefined);
  });
});

describe('per-token rate limiting as a token bucket', () => {
  let nextId = 1;

  const create = (t: TestApp) => t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: `{"id":${nextId++},"name":"a"}` });

  it('allows a burst of RATE_LIMIT_BURST at once, then one request per token interval, with Retry-After until the next', async (context) => {
    // Sustained 2 per 2 s (a token each second), burst 4: neither a fixed window of 2 nor one of 4 answers this way.
    const clock = new FakeClock();
    const t = await buildTestApp(context, sqliteDatabase, { RATE_LIMIT_MAX: '2', RATE_LIMIT_WINDOW_MS: '2000', RATE_LIMIT_BURST: '4' }, { now: clock.now });
    const burst = await Promise.all(Array.from({ length: 4 }, () => create(t)));
    assert.deepEqual(burst.map((response) => response.statusCode), [200, 200, 200, 200]);
    assert.deepEqual(burst.map((response) => response.headers['x-ratelimit-remaining']).sort(), ['0', '1', '2', '3']);
    assert.equal(burst[0]?.headers['x-ratelimit-limit'], '4');

    const refused = await create(t);
    assertErrorRecord(refused, 429, /^rate limit exceeded; retry after 1 s$/);
    // The next token is due within a second, not at the end of a 2 s window.
    assert.equal(refused.headers['retry-after'], '1');

    clock.advance(1100);
    const earned = await create(t);
    assert.equal(earned.statusCode, 200, earned.body);
    // One interval earns one token, not a new burst.
    assertErrorRecord(await create(t), 429);
  });

  it('refills a drained bucket to the burst, never beyond it', async (context) => {
    const clock = new FakeClock();
    const t = await buildTestApp(context, sqliteDatabase, { RATE_LIMIT_MAX: '10', RATE_LIMIT_WINDOW_MS: '100', RATE_LIMIT_BURST: '2' }, { now: clock.now });
    // 10 per 100 ms: after 300 ms a bucket without a cap would hold 30 tokens.
    clock.advance(300);
    const responses = await Promise.all(Array.from({ length: 3 }, () => create(t)));
    assert.deepEqual(responses.map((response) => response.statusCode).sort(), [200, 200, 429]);
  });

  it('defaults the burst to RATE_LIMIT_MAX', async (context) => {
    const clock = new FakeClock();
    const t = await buildTestApp(context, sqliteDatabase, { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_MS: '60000' }, { now: clock.now });
    assert.equal(t.config.rateLimit?.burst, 3);
    const responses = await Promise.all(Array.from({ length: 4 }, () => create(t)));
    assert.deepEqual(responses.map((response) => response.statusCode).sort(), [200, 200, 200, 429]);
    const refused = responses.find((response) => response.statusCode === 429);
    // 3 per minute: the next token is 20 s away.
    assert.ok(refused);
    assert.equal(refused.headers['retry-after'], '20');
  });
});
