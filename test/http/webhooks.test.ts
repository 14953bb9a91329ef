/**
 * The new-plant webhook, end to end on each store: the real app in-process, real receivers (node:http on 127.0.0.1),
 * deliveries checked with the `standardwebhooks` package's Webhook.verify. Fast retry schedules stand in for the
 * real one; waiting is on the receivers' requests, never on a fixed sleep.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import type { WebhookSubscriptionInfo } from '../../src/storage/webhook-store.js';
import type { Resolver } from '../../src/webhooks/address-policy.js';
import { generateEventIdPrefix, generateWebhookSecret } from '../../src/webhooks/signature.js';
import { startTestApp, type TestApp, type TestAppOptions } from '../helpers/app.js';
import { DATABASES } from '../helpers/databases.js';
import { Receiver, type Received, type Responder } from '../helpers/receiver.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

/** Fast enough for tests; every test that starts an app lets private networks through unless it tests the refusal. */
const FAST = {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_RETRY_SCHEDULE: '30ms,30ms,30ms',
  WEBHOOK_TIMEOUT_MS: '2000',
};

async function subscribe(t: TestApp, name: string, url: string): Promise<string> {
  const secret = generateWebhookSecret();
  await t.store.webhookSubscriptions.add({ name, url, secret, idPrefix: generateEventIdPrefix(), createdAt: new Date() });
  return secret;
}

async function create(t: TestApp, body: string): Promise<number> {
  const response = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: body });
  return response.statusCode;
}

async function info(t: TestApp, name: string): Promise<WebhookSubscriptionInfo> {
  const found = (await t.store.webhookSubscriptions.list()).find((subscription) => subscription.name === name);
  assert.ok(found, `subscription ${name}`);
  return found;
}

/** Events ever written for a subscription: waiting + delivered + failed (no event here is both). */
async function eventsWritten(t: TestApp, name: string): Promise<number> {
  const { waiting, delivered, failed } = await info(t, name);
  return waiting + delivered + failed;
}

/** Polls the store (not the receiver) until `check` holds: for outcomes the receiver cannot see. */
async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The `id` of a body, exactly, from its text (JSON.parse would round it). */
function idOf(received: Received): string {
  return /^\{"id":(-?\d+),/.exec(received.body)?.[1] ?? 'none';
}

/** A logger that keeps its lines, to look for the warnings the dispatcher writes. */
function capturingLogger(): { log: pino.Logger; lines: () => Array<Record<string, unknown>> } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      callback();
    },
  });
  return { log: pino({ level: 'warn' }, stream), lines: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

for (const { kind, create: createDatabase } of DATABASES) {
  describe(`new-plant webhooks on ${kind}`, () => {
    const cleanups: Array<() => Promise<void>> = [];

    /** A fresh database and app for one test, closed (and the database removed) after the suite. */
    async function app(env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<TestApp> {
      const t = await startTestApp(createDatabase, { ...FAST, ...env }, { webhookPollIntervalMs: 50, ...options });
      cleanups.push(() => t.close());
      return t;
    }

    async function receiver(...args: Parameters<typeof Receiver.start>): Promise<Receiver> {
      const started = await Receiver.start(...args);
      cleanups.push(() => started.close());
      return started;
    }

    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup();
    });

    it('delivers each created plant as its exact NewPlant, signed so that standardwebhooks verifies it', async () => {
      const t = await app();
      const hook = await receiver();
      const secret = await subscribe(t, 'search', hook.url());
      const bodies = [
        '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}',
        `{"id":${INT64_MAX},"name":"Max"}`,
        `{"id":${INT64_MIN},"name":"Min","tag":""}`,
        '{"id":12,"name":"Quote \\" \\u00e9 🌱"}',
      ];
      for (const body of bodies) assert.equal(await create(t, body), 200);
      await hook.waitForCount(bodies.length);
      const verifier = new Webhook(secret);
      const expected = [
        '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}',
        `{"id":${INT64_MAX},"name":"Max"}`,
        `{"id":${INT64_MIN},"name":"Min","tag":""}`,
        '{"id":12,"name":"Quote \\" é 🌱"}',
      ];
      assert.deepEqual(hook.received.map((r) => r.body).sort(), [...expected].sort(), 'the bodies, byte for byte, ids exact');
      const ids = new Set<string>();
      for (const request of hook.received) {
        assert.equal(request.method, 'POST');
        assert.equal(request.headers['content-type'], 'application/json');
        verifier.verify(request.body, request.headers as Record<string, string>, { jsonParse: false });
        const timestamp = Number(request.headers['webhook-timestamp']);
        assert.ok(Math.abs(timestamp - Date.now() / 1000) < 60, 'webhook-timestamp is Unix seconds of the attempt');
        assert.match(String(request.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
        ids.add(String(request.headers['webhook-id']));
      }
      assert.equal(ids.size, bodies.length, 'each event has its own webhook-id');
      assert.throws(() => new Webhook(generateWebhookSecret()).verify(hook.received[0]?.body ?? '', hook.received[0]?.headers as Record<string, string>));
      await until(async () => (await info(t, 'search')).delivered === 4, 'four recorded as delivered');
      assert.ok((await info(t, 'search')).lastSuccessAt);
    });

    it('writes no event with no active subscription, nor for an idempotent replay or a 409; a plant deleted and created again emits again', async () => {
      const t = await app();
      const hook = await receiver();
      assert.equal(await create(t, '{"id":1,"name":"Before"}'), 200);
      await subscribe(t, 'audit', hook.url());
      await t.store.webhookSubscriptions.setEnabled('audit', false, 'paused');
      assert.equal(await create(t, '{"id":2,"name":"While disabled"}'), 200);
      assert.equal(await eventsWritten(t, 'audit'), 0, 'nothing for a disabled subscription');
      await t.store.webhookSubscriptions.setEnabled('audit', true, '');

      assert.equal(await create(t, '{"id":3,"name":"Fern"}'), 200);
      assert.equal(await eventsWritten(t, 'audit'), 1, 'the event is in the outbox when the 200 is answered');
      assert.equal(await create(t, '{"id":3,"name":"Fern"}'), 200, 'replay');
      assert.equal(await create(t, '{"id":3,"name":"Ivy"}'), 409);
      assert.equal(await create(t, '{"id":1,"name":"Before"}'), 200, 'replay of a plant created before the subscription');
      assert.equal(await eventsWritten(t, 'audit'), 1, 'a replay and a 409 write no event');

      assert.equal((await t.app.inject({ method: 'DELETE', url: '/plants/3', headers: t.headers })).statusCode, 204);
      assert.equal(await create(t, '{"id":3,"name":"Fern"}'), 200, 'created again');
      assert.equal(await eventsWritten(t, 'audit'), 2);
      await hook.waitForCount(2);
      assert.deepEqual(hook.received.map(idOf), ['3', '3']);
      assert.notEqual(hook.received[0]?.headers['webhook-id'], hook.received[1]?.headers['webhook-id'], 'a new creation is a new event');
      await until(async () => (await info(t, 'audit')).delivered === 2, 'both delivered');
    });

    it('retries after 500s and after a timeout with the same webhook-id, and logs each attempt', async () => {
      const t = await app({ WEBHOOK_TIMEOUT_MS: '300' });
      const hook = await receiver((_request, index) => (index === 0 ? 'hang' : index <= 2 ? { status: 500 } : { status: 204 }));
      await subscribe(t, 'flaky', hook.url());
      assert.equal(await create(t, '{"id":42,"name":"Retry me"}'), 200);
      await hook.waitForCount(4);
      const ids = new Set(hook.received.map((r) => r.headers['webhook-id']));
      assert.equal(ids.size, 1, 'stable across retries: the subscriber’s idempotency key');
      await until(async () => (await info(t, 'flaky')).delivered === 1, 'delivered');
      const flaky = await info(t, 'flaky');
      assert.equal(flaky.retried, 3);
      assert.equal(flaky.failed, 0);
      assert.equal(flaky.waiting, 0);
      const log = await t.store.webhookSubscriptions.deliveries({ failedOnly: false, limit: 10 });
      assert.deepEqual(
        log.map((d) => [d.attempt, d.status, d.error === null ? null : d.error.replace(/\d+/g, 'N'), d.plantId]),
        [
          [4, 204, null, 42n],
          [3, 500, null, 42n],
          [2, 500, null, 42n],
          [1, null, 'timed out after N ms', 42n],
        ],
      );
      assert.equal((await t.store.webhookSubscriptions.deliveries({ failedOnly: true, limit: 10 })).length, 3);
      assert.equal(log[0]?.eventId, ids.values().next().value);
      assert.deepEqual(t.services.webhooks.snapshot(), { waiting: t.services.webhooks.snapshot().waiting, inFlight: 0, delivered: 1, retried: 3, failed: 0, disabled: 0 });
    });

    it('honours Retry-After on a 429, and does not follow a redirect', async () => {
      const t = await app();
      const elsewhere = await receiver();
      const hook = await receiver((_request, index): ReturnType<Responder> =>
        index === 0 ? { status: 429, headers: { 'retry-after': '1' } } : index === 1 ? { status: 307, headers: { location: elsewhere.url() } } : { status: 200 },
      );
      await subscribe(t, 'limited', hook.url());
      assert.equal(await create(t, '{"id":7,"name":"Patience"}'), 200);
      await hook.waitForCount(3);
      const [first, second] = hook.received as [Received, Received];
      assert.ok(second.at - first.at >= 950, `waited ${Math.round(second.at - first.at)} ms, not the schedule's 30 ms`);
      assert.equal(elsewhere.received.length, 0, 'the redirect was not followed');
    });

    it('a 410 Gone disables the subscription at once, with the reason and a warning', async () => {
      const { log, lines } = capturingLogger();
      const t = await app({}, { log });
      const hook = await receiver(() => ({ status: 410 }));
      await subscribe(t, 'gone', hook.url());
      assert.equal(await create(t, '{"id":8,"name":"Nobody home"}'), 200);
      await until(async () => (await info(t, 'gone')).disabledAt !== null, 'disabled');
      const gone = await info(t, 'gone');
      assert.match(gone.disabledReason ?? '', /410 Gone/);
      assert.equal(hook.received.length, 1, 'no retry to a subscriber that is gone');
      assert.equal(await create(t, '{"id":9,"name":"Later"}'), 200);
      assert.equal(gone.waiting, 1, 'its event waits, in case it is enabled again');
      assert.equal((await info(t, 'gone')).waiting, 1, 'a disabled subscription gets no new events');
      await until(async () => lines().some((line) => line.msg === 'webhook subscription disabled'), 'the warning');
      const warning = lines().find((line) => line.msg === 'webhook subscription disabled');
      assert.equal(warning?.level, 40);
      assert.equal(warning?.subscription, 'gone');
    });

    it('marks an event failed when the schedule is spent, disables the subscription, and redelivers on request', async () => {
      const t = await app({ WEBHOOK_RETRY_SCHEDULE: '20ms,20ms' });
      let up = false;
      const hook = await receiver(() => ({ status: up ? 200 : 500 }));
      await subscribe(t, 'down', hook.url());
      assert.equal(await create(t, '{"id":-9223372036854775808,"name":"Lost?"}'), 200);
      await until(async () => (await info(t, 'down')).failed === 1, 'failed');
      const down = await info(t, 'down');
      assert.equal(hook.received.length, 3, 'one attempt more than the schedule has delays');
      assert.equal(down.waiting, 0);
      assert.ok(down.disabledAt, 'disabled: it failed for the whole schedule');
      assert.match(down.disabledReason ?? '', /whole retry schedule.*HTTP 500/);
      const [last] = await t.store.webhookSubscriptions.deliveries({ name: 'down', failedOnly: true, limit: 1 });
      assert.equal(last?.plantId, INT64_MIN);

      up = true;
      assert.equal(await t.store.webhookSubscriptions.redeliver(last?.eventId ?? ''), 'scheduled-disabled');
      assert.equal(await t.store.webhookSubscriptions.setEnabled('down', true, ''), true);
      await hook.waitForCount(4);
      assert.equal(hook.received[3]?.headers['webhook-id'], last?.eventId, 'the same event, the same id');
      await until(async () => (await info(t, 'down')).delivered === 1, 'redelivered');
      assert.equal(await t.store.webhookSubscriptions.redeliver('msg_nothere_1'), 'not-found');
    });

    it('a subscription that succeeded since the event was created is not disabled when one event fails', async () => {
      const t = await app({ WEBHOOK_RETRY_SCHEDULE: '20ms' });
      const hook = await receiver((request) => ({ status: idOf(request) === '1' ? 500 : 200 }));
      await subscribe(t, 'partial', hook.url());
      assert.equal(await create(t, '{"id":1,"name":"Poison"}'), 200);
      assert.equal(await create(t, '{"id":2,"name":"Fine"}'), 200);
      await until(async () => (await info(t, 'partial')).failed === 1, 'failed');
      const partial = await info(t, 'partial');
      assert.equal(partial.disabledAt, null);
      assert.equal(partial.delivered, 1);
    });

    it('signs with both secrets during a rotation’s grace period, and only the new one after', async () => {
      const t = await app();
      const hook = await receiver();
      const old = await subscribe(t, 'rotating', hook.url());
      const fresh = generateWebhookSecret();
      await t.store.webhookSubscriptions.rotateSecret('rotating', fresh, 60_000);
      // The dispatcher re-reads subscriptions every poll (50 ms here, a second by default).
      await t.services.webhooks.prune();
      await until(async () => {
        const before = hook.received.length;
        assert.equal(await create(t, `{"id":${100 + before},"name":"Probe"}`), 200);
        await hook.waitForCount(before + 1);
        return String(hook.received.at(-1)?.headers['webhook-signature']).split(' ').length === 2;
      }, 'two signatures');
      const during = hook.received.at(-1) as Received;
      new Webhook(old).verify(during.body, during.headers as Record<string, string>, { jsonParse: false });
      new Webhook(fresh).verify(during.body, during.headers as Record<string, string>, { jsonParse: false });

      const third = generateWebhookSecret();
      await t.store.webhookSubscriptions.rotateSecret('rotating', third, 0);
      await until(async () => {
        const before = hook.received.length;
        assert.equal(await create(t, `{"id":${200 + before},"name":"Probe"}`), 200);
        await hook.waitForCount(before + 1);
        const signature = String(hook.received.at(-1)?.headers['webhook-signature']);
        return signature.split(' ').length === 1;
      }, 'one signature');
      const afterGrace = hook.received.at(-1) as Received;
      new Webhook(third).verify(afterGrace.body, afterGrace.headers as Record<string, string>, { jsonParse: false });
      assert.throws(() => new Webhook(fresh).verify(afterGrace.body, afterGrace.headers as Record<string, string>, { jsonParse: false }));
    });

    it('prunes delivered events past the retention and keeps failed and waiting ones', async () => {
      const t = await app({ WEBHOOK_RETENTION: '0ms', WEBHOOK_RETRY_SCHEDULE: '20ms' });
      const good = await receiver();
      const bad = await receiver(() => ({ status: 500 }));
      await subscribe(t, 'good', good.url());
      await subscribe(t, 'bad', bad.url());
      for (let id = 1; id <= 3; id += 1) assert.equal(await create(t, `{"id":${id},"name":"P${id}"}`), 200);
      // 'bad' fails its events for the whole schedule and is disabled; those not yet spent by then wait.
      await until(async () => {
        const { failed, waiting, disabledAt } = await info(t, 'bad');
        return (await info(t, 'good')).delivered === 3 && disabledAt !== null && failed + waiting === 3 && t.services.webhooks.snapshot().inFlight === 0;
      }, 'outcomes');
      // An attempt that had left the in-flight count can still be on its way to storage (seen on PostgreSQL at load):
      // the attempts are counted once two readings 200 ms apart agree.
      const attemptsOfBad = async () => (await t.store.webhookSubscriptions.deliveries({ name: 'bad', failedOnly: false, limit: 100 })).length;
      let badAttempts = await attemptsOfBad();
      for (let previous = -1; previous !== badAttempts; ) {
        previous = badAttempts;
        await new Promise((resolve) => setTimeout(resolve, 200));
        badAttempts = await attemptsOfBad();
      }
      const badInfo = await info(t, 'bad');
      assert.ok(badInfo.failed >= 1);
      assert.ok(badAttempts >= 2);
      assert.equal((await t.store.webhookSubscriptions.deliveries({ name: 'good', failedOnly: false, limit: 100 })).length, 3);
      const deleted = await t.services.webhooks.prune();
      assert.equal(deleted, 3, 'the three delivered events');
      assert.equal((await t.store.webhookSubscriptions.deliveries({ name: 'good', failedOnly: false, limit: 100 })).length, 0, 'and their attempts');
      assert.equal((await t.store.webhookSubscriptions.deliveries({ name: 'bad', failedOnly: false, limit: 100 })).length, badAttempts, 'failed and waiting events keep theirs');
      assert.deepEqual([(await info(t, 'bad')).failed, (await info(t, 'bad')).waiting], [badInfo.failed, badInfo.waiting]);
      assert.equal((await info(t, 'good')).delivered, 3, 'totals survive pruning');
    });

    it('keeps delivered events within the retention (default 7 days)', async () => {
      const t = await app({ WEBHOOK_RETENTION: '7d' });
      const hook = await receiver();
      await subscribe(t, 'kept', hook.url());
      assert.equal(await create(t, '{"id":1,"name":"Kept"}'), 200);
      await until(async () => (await info(t, 'kept')).delivered === 1, 'delivered');
      assert.equal(await t.services.webhooks.prune(), 0);
      assert.equal((await t.store.webhookSubscriptions.deliveries({ failedOnly: false, limit: 10 })).length, 1);
    });

    it('refuses loopback by literal address and by a name resolving to loopback, checked when connecting', async () => {
      // The name is resolved by a stub handed to the dispatcher (no /etc/hosts, no DNS server): it answers 127.0.0.1
      // for hooks.example.test. The check runs in undici's connect, on the address the socket would connect to.
      const resolve: Resolver = async (hostname) => {
        if (hostname === 'hooks.example.test') return [{ address: '127.0.0.1', family: 4 }];
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      };
      const t = await app({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false', WEBHOOK_RETRY_SCHEDULE: '20ms' }, { webhookResolver: resolve });
      const hook = await receiver();
      await subscribe(t, 'literal', hook.url());
      await subscribe(t, 'named', `http://hooks.example.test:${hook.port}/hook`);
      await subscribe(t, 'mapped', `http://[::ffff:127.0.0.1]:${hook.port}/hook`);
      assert.equal(await create(t, '{"id":1,"name":"Secret"}'), 200);
      await until(async () => (await t.store.webhookSubscriptions.list()).every((s) => s.failed === 1), 'all three failed');
      assert.equal(hook.received.length, 0, 'nothing reached the loopback receiver');
      const errors = new Map((await t.store.webhookSubscriptions.deliveries({ failedOnly: true, limit: 10 })).map((d) => [d.subscription, d.error]));
      assert.match(errors.get('literal') ?? '', /127\.0\.0\.1 is a loopback address/);
      assert.match(errors.get('named') ?? '', /hooks\.example\.test resolves only to refused addresses: 127\.0\.0\.1 is a loopback address/);
      assert.match(errors.get('mapped') ?? '', /is a loopback address/);

      // The control: the same stub with private networks allowed reaches the receiver, so the refusal above was the policy's.
      const allowed = await app({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { webhookResolver: resolve });
      await subscribe(allowed, 'named', `http://hooks.example.test:${hook.port}/hook`);
      assert.equal(await create(allowed, '{"id":2,"name":"Internal"}'), 200);
      await hook.waitForCount(1);
      assert.equal(idOf(hook.received[0] as Received), '2');
    });

    it('keeps /readyz at 200 while a subscriber is down, and answers creates meanwhile', async () => {
      const t = await app({ WEBHOOK_TIMEOUT_MS: '200' });
      const dead = await receiver(() => 'hang');
      await subscribe(t, 'dead', dead.url());
      for (let id = 1; id <= 20; id += 1) assert.equal(await create(t, `{"id":${id},"name":"P"}`), 200);
      await dead.waitForCount(1);
      assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
      assert.ok(t.services.webhooks.snapshot().inFlight <= t.config.webhooks.maxInFlightPerSubscription, 'bounded in flight');
    });

    it('picks up a subscription added while it runs, within a second or two (the default poll)', async () => {
      const t = await startTestApp(createDatabase, FAST);
      cleanups.push(() => t.close());
      const hook = await receiver();
      await subscribe(t, 'late', hook.url());
      assert.equal(await create(t, '{"id":5,"name":"Noticed"}'), 200);
      const started = performance.now();
      await hook.waitForCount(1, 3000);
      assert.ok(performance.now() - started < 3000);
    });
  });
}
