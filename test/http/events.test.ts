import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { waitFor } from '../helpers/wait.js';
import { hashToken, generateToken } from '../../src/auth/tokens.js';
import { RESET_MESSAGE } from '../../src/feed/events.js';
import { DATABASES } from '../helpers/databases.js';
import { buildTestApp, startTestApp, type TestApp } from '../helpers/app.js';
import { EventStreamClient, type ReceivedEvent } from '../helpers/event-stream.js';
import { INT64_MAX, INT64_MIN, PAST_DOUBLE, plantJson } from '../helpers/plants.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { parsePrometheusText } from '../helpers/prometheus.js';
import { newToken } from '../helpers/tokens.js';

stopPostgresAfterAll();

/**
 * GET /plants/events (docs/event-stream.md): refusals as Error records before any stream;
 * creates and deletes as events with exact ids; resuming after a disconnect with no gap and no duplicate; a reset
 * for a pruned cursor; a stream ended cleanly when the app closes. Streams need a real socket, so the app listens on
 * loopback; the refusals are injected.
 */

async function listening(t: TestApp): Promise<string> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

async function create(t: TestApp, id: string, name: string, tag?: string): Promise<void> {
  const response = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: plantJson(id, name, tag) });
  assert.equal(response.statusCode, 200, response.body);
}

async function remove(t: TestApp, id: string): Promise<void> {
  const response = await t.app.inject({ method: 'DELETE', url: `/plants/${id}`, headers: t.headers });
  assert.equal(response.statusCode, 204, response.body);
}

const summary = (events: readonly ReceivedEvent[]) => events.map(({ event, data }) => `${event} ${data}`);
const ids = (events: readonly ReceivedEvent[]) => events.map((event) => BigInt(event.id ?? 'NaN'));

for (const database of DATABASES) {
  describe(`GET /plants/events on ${database.kind}`, () => {
    // Each test on a database of its own: they count change sequences and ids from the first.
    const app = (context: TestContext, env: Record<string, string> = {}) => buildTestApp(context, database.create, { FEED_HEARTBEAT_MS: '50', ...env });

    it('refuses before any stream: 401 without a token, 403 without plants:read, 406 for another Accept, 400 for a bad cursor', async (context) => {
      const t = await app(context);
      const writer = generateToken();
      await t.store.tokens.add(newToken(`writer-${t.tokenName}`, hashToken(writer), { scopes: ['plants:create'] }));
      const cases: Array<[Record<string, string>, string, number, RegExp]> = [
        [{}, '/plants/events', 401, /token/i],
        [{ authorization: `Bearer ${writer}` }, '/plants/events', 403, /plants:read/],
        [{ authorization: `Bearer ${t.token}`, accept: 'application/json' }, '/plants/events', 406, /text\/event-stream/],
        [{ authorization: `Bearer ${t.token}` }, '/plants/events?after=-1', 400, /non-negative integer/],
        [{ authorization: `Bearer ${t.token}` }, '/plants/events?after=01', 400, /non-negative integer/],
        [{ authorization: `Bearer ${t.token}` }, '/plants/events?after=9223372036854775808', 400, /non-negative integer/],
        [{ authorization: `Bearer ${t.token}`, 'last-event-id': 'x' }, '/plants/events', 400, /Last-Event-ID/],
        [{ authorization: `Bearer ${t.token}` }, `/plants/events?access_token=${t.token}`, 400, /not both/],
        [{}, '/plants/events?access_token=nope', 401, /token/i],
      ];
      for (const [headers, url, status, message] of cases) {
        const response = await t.app.inject({ method: 'GET', url, headers });
        assert.equal(response.statusCode, status, `${url} ${JSON.stringify(headers)}: ${response.body}`);
        assert.match(response.headers['content-type'] as string, /^application\/json/);
        const body = response.json() as { error: number; message: string };
        assert.equal(body.error, status);
        assert.match(body.message, message);
      }
    });

    it('streams creates and deletes live, ids exact, starting at the newest change; retry and keep-alive comments', async (context) => {
      const t = await app(context);
      const base = await listening(t);
      await create(t, '1', 'before the stream');
      const stream = await EventStreamClient.open(`${base}/plants/events`, { authorization: `Bearer ${t.token}` });
      context.after(() => stream.close());
      assert.equal(stream.status, 200);
      assert.match(stream.headers['content-type'] as string, /^text\/event-stream/);
      assert.ok(stream.headers['x-request-id']);
      await stream.waitForComment();
      assert.equal(stream.retry, 2000);
      await create(t, PAST_DOUBLE, 'Monstera', 'aroid');
      await create(t, INT64_MIN, 'Min');
      await create(t, INT64_MAX, 'Max', 'z');
      await remove(t, PAST_DOUBLE);
      const events = await stream.waitForEvents(4);
      assert.deepEqual(summary(events), [
        `plant.created {"id":${PAST_DOUBLE},"name":"Monstera","tag":"aroid"}`,
        `plant.created {"id":${INT64_MIN},"name":"Min"}`,
        `plant.created {"id":${INT64_MAX},"name":"Max","tag":"z"}`,
        `plant.deleted {"id":${PAST_DOUBLE}}`,
      ]);
      const sequence = ids(events);
      sequence.slice(1).forEach((id, index) => assert.equal(id, (sequence[index] as bigint) + 1n));
    });

    it('resumes after a disconnect with exactly the changes after the last id, by Last-Event-ID or ?after=, then live', async (context) => {
      const t = await app(context);
      const base = await listening(t);
      for (let id = 1; id <= 5; id += 1) await create(t, String(id), `plant ${id}`);
      const first = await EventStreamClient.open(`${base}/plants/events?after=0`, { authorization: `Bearer ${t.token}` });
      const replayed = await first.waitForEvents(5);
      first.close();
      await first.ended;
      assert.deepEqual(summary(replayed).map((line) => line.split(' ')[0]), Array(5).fill('plant.created'));
      const lastSeen = replayed[2]?.id as string;
      // Changes made while no stream is open.
      for (let id = 6; id <= 8; id += 1) await create(t, String(id), `plant ${id}`);
      await remove(t, '1');
      const resumed = await EventStreamClient.open(`${base}/plants/events?after=0`, { authorization: `Bearer ${t.token}`, 'last-event-id': lastSeen });
      context.after(() => resumed.close());
      const backlog = await resumed.waitForEvents(6);
      assert.deepEqual(ids(backlog), Array.from({ length: 6 }, (_, index) => BigInt(lastSeen) + 1n + BigInt(index)));
      assert.deepEqual(summary(backlog).slice(0, 2), [`plant.created {"id":4,"name":"plant 4"}`, `plant.created {"id":5,"name":"plant 5"}`]);
      assert.equal(summary(backlog).at(-1), 'plant.deleted {"id":1}');
      await create(t, '9', 'live');
      const [live] = (await resumed.waitForEvents(7)).slice(6);
      assert.equal(live?.data, '{"id":9,"name":"live"}');
      assert.equal(BigInt(live?.id ?? 0), BigInt(lastSeen) + 7n);
      const byQuery = await EventStreamClient.open(`${base}/plants/events?after=${backlog.at(-1)?.id}`, { authorization: `Bearer ${t.token}` });
      context.after(() => byQuery.close());
      assert.deepEqual(summary(await byQuery.waitForEvents(1)), ['plant.created {"id":9,"name":"live"}']);
    });

    it('counts the events sent and the socket writes that carried them: a backlog page in one write, a live change in another', async (context) => {
      // Scraped afresh each time, not from the last second's rendering.
      const t = await app(context, { METRICS_CACHE_MS: '0' });
      const base = await listening(t);
      const counters = async () => {
        const response = await t.app.inject({ url: '/metrics', headers: t.headers });
        assert.equal(response.statusCode, 200, response.body);
        const metrics = parsePrometheusText(response.body);
        return { events: metrics.value('plantstore_event_stream_events_total'), writes: metrics.value('plantstore_event_stream_writes_total') };
      };
      assert.deepEqual(await counters(), { events: 0, writes: 0 });
      for (let id = 1; id <= 5; id += 1) await create(t, String(id), `plant ${id}`);
      const stream = await EventStreamClient.open(`${base}/plants/events?after=0`, { authorization: `Bearer ${t.token}` });
      context.after(() => stream.close());
      await stream.waitForEvents(5);
      assert.deepEqual(await counters(), { events: 5, writes: 1 });
      await create(t, '6', 'live');
      await stream.waitForEvents(6);
      assert.deepEqual(await counters(), { events: 6, writes: 2 });
    });

    it('sends one reset, with the newest id, to a cursor older than the changes kept, then goes on from there', async (context) => {
      const t = await app(context);
      const base = await listening(t);
      for (let id = 1; id <= 4; id += 1) await create(t, String(id), `plant ${id}`);
      const newest = await t.store.changes.newestSequence();
      assert.equal(await t.store.changes.pruneChanges(86_400_000, 2), 2);
      const stream = await EventStreamClient.open(`${base}/plants/events?after=${newest - 3n}`, { authorization: `Bearer ${t.token}` });
      context.after(() => stream.close());
      const [reset] = await stream.waitForEvents(1);
      assert.equal(reset?.event, 'reset');
      assert.equal(reset?.id, String(newest));
      assert.deepEqual(JSON.parse(reset?.data ?? ''), { message: RESET_MESSAGE });
      await create(t, '5', 'after the reset');
      const [, next] = await stream.waitForEvents(2);
      assert.equal(next?.data, '{"id":5,"name":"after the reset"}');
      assert.equal(next?.id, String(newest + 1n));
      // A cursor this store never reached is a reset too (a restored or another database).
      const ahead = await EventStreamClient.open(`${base}/plants/events?after=${newest + 100n}`, { authorization: `Bearer ${t.token}` });
      context.after(() => ahead.close());
      assert.equal((await ahead.waitForEvents(1))[0]?.event, 'reset');
      // One still within what is kept is no reset.
      const kept = await EventStreamClient.open(`${base}/plants/events?after=${newest - 1n}`, { authorization: `Bearer ${t.token}` });
      context.after(() => kept.close());
      assert.deepEqual(ids(await kept.waitForEvents(2)), [newest, newest + 1n]);
    });

    it('takes the token as access_token for browsers, and limits the streams a token may hold (429)', async (context) => {
      const t = await app(context, { FEED_STREAMS_PER_TOKEN: '1' });
      const base = await listening(t);
      const stream = await EventStreamClient.open(`${base}/plants/events?access_token=${encodeURIComponent(t.token)}`);
      context.after(() => stream.close());
      assert.equal(stream.status, 200);
      const second = await EventStreamClient.open(`${base}/plants/events`, { authorization: `Bearer ${t.token}` });
      assert.equal(second.status, 429);
      assert.ok(second.headers['retry-after']);
      assert.equal((JSON.parse(await second.body()) as { error: number }).error, 429);
      await create(t, '1', 'seen');
      assert.equal((await stream.waitForEvents(1))[0]?.data, '{"id":1,"name":"seen"}');
      stream.close();
      await stream.ended;
      // The stream's count is released when it ends.
      const third = await EventStreamClient.open(`${base}/plants/events`, { authorization: `Bearer ${t.token}` });
      context.after(() => third.close());
      assert.equal(third.status, 200);
    });

    it('closes a client that does not read once its unsent bytes pass the bound', async (context) => {
      const t = await app(context, { FEED_STREAM_BUFFER_BYTES: '1024', NAME_MAX_LENGTH: '4096', METRICS_CACHE_MS: '0' });
      const base = await listening(t);
      // A raw socket that never reads: once the kernel's buffers are full, what the server writes waits in its own.
      const slow = net.connect({ host: '127.0.0.1', port: Number(new URL(base).port) });
      context.after(() => slow.destroy());
      await once(slow, 'connect');
      slow.write(`GET /plants/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${t.token}\r\n\r\n`);
      const closedBySever = once(slow, 'close');
      await waitFor('the stream to open', () => t.services.feed.subscribers === 1);
      const name = 'n'.repeat(4000);
      let id = 0;
      while (t.services.feed.subscribers > 0) {
        id += 1;
        await create(t, String(id), name);
        assert.ok(id < 50_000, 'the slow stream was never closed');
      }
      slow.resume();
      await closedBySever;
      const metrics = (await t.app.inject({ url: '/metrics', headers: t.headers })).body;
      assert.match(metrics, /plantstore_event_streams_closed_total\{reason="slow"\} 1/);
    });

    it('counts streams as connections, not as pending requests: more streams than MAX_PENDING_REQUESTS leave a pipelining client answered', async (context) => {
      const t = await app(context, { MAX_PENDING_REQUESTS: '2' });
      const base = await listening(t);
      const streams = await Promise.all([1, 2, 3].map(() => EventStreamClient.open(`${base}/plants/events`, { authorization: `Bearer ${t.token}` })));
      context.after(() => {
        for (const stream of streams) stream.close();
      });
      await waitFor('the three streams to be live', () => t.services.feed.subscribers === 3);
      // Two requests in one write: the second is parsed while the first is unanswered, which the pending bound refuses
      // (closing the connection) once MAX_PENDING_REQUESTS requests are pending.
      const socket = net.connect({ host: '127.0.0.1', port: Number(new URL(base).port) });
      context.after(() => socket.destroy());
      let received = '';
      socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
      await once(socket, 'connect');
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      await once(socket, 'close');
      assert.deepEqual(received.match(/HTTP\/1\.1 \d{3}/g), ['HTTP/1.1 200', 'HTTP/1.1 200'], received);
    });

    it('ends every stream cleanly when the app closes', async (context) => {
      const t = await startTestApp(database.create, { FEED_HEARTBEAT_MS: '50' });
      let closed = false;
      context.after(async () => {
        if (!closed) await t.close();
      });
      const base = await listening(t);
      const stream = await EventStreamClient.open(`${base}/plants/events`, { authorization: `Bearer ${t.token}` });
      await stream.waitForComment();
      await t.close();
      closed = true;
      await stream.ended;
      assert.ok(stream.isEnded);
    });
  });
}
