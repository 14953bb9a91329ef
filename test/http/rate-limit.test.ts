/**
 * Per-token rate limiting as a token bucket: RATE_LIMIT_BURST requests at once, then RATE_LIMIT_MAX per
 * RATE_LIMIT_WINDOW_MS. (test/process/overload.test.ts covers what any limiter must do: per token, after
 * authentication, before the body.) The buckets run on a FakeClock: a test moves time on by hand instead of sleeping
 * through it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { FakeClock } from '../helpers/clock.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';

describe('per-token rate limiting as a token bucket', () => {
  let db: TestDatabase;
  let nextId = 1;
  before(async () => {
    db = await sqliteDatabase();
  });
  after(() => db?.cleanup());

  const create = (t: TestApp) => t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: `{"id":${nextId++},"name":"a"}` });

  it('allows a burst of RATE_LIMIT_BURST at once, then one request per token interval, with Retry-After until the next', async (context) => {
    // Sustained 2 per 2 s (a token each second), burst 4: neither a fixed window of 2 nor one of 4 answers this way.
    const clock = new FakeClock();
    const t = await buildTestApp(context, db.url, { RATE_LIMIT_MAX: '2', RATE_LIMIT_WINDOW_MS: '2000', RATE_LIMIT_BURST: '4' }, { now: clock.now });
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
    const t = await buildTestApp(context, db.url, { RATE_LIMIT_MAX: '10', RATE_LIMIT_WINDOW_MS: '100', RATE_LIMIT_BURST: '2' }, { now: clock.now });
    // 10 per 100 ms: after 300 ms a bucket without a cap would hold 30 tokens.
    clock.advance(300);
    const responses = await Promise.all(Array.from({ length: 3 }, () => create(t)));
    assert.deepEqual(responses.map((response) => response.statusCode).sort(), [200, 200, 429]);
  });

  it('defaults the burst to RATE_LIMIT_MAX', async (context) => {
    const clock = new FakeClock();
    const t = await buildTestApp(context, db.url, { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_MS: '60000' }, { now: clock.now });
    assert.equal(t.config.rateLimit?.burst, 3);
    const responses = await Promise.all(Array.from({ length: 4 }, () => create(t)));
    assert.deepEqual(responses.map((response) => response.statusCode).sort(), [200, 200, 200, 429]);
    const refused = responses.find((response) => response.statusCode === 429);
    // 3 per minute: the next token is 20 s away.
    assert.ok(refused);
    assert.equal(refused.headers['retry-after'], '20');
  });
});
