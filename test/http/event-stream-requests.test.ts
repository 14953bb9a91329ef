/**
 * Every way of asking for GET /plants/events is answered (docs/event-stream.md): a request pipelined behind another
 * on its connection becomes a counted stream; HEAD gets the head alone and opens nothing; a request behind an answer
 * that closes the connection, or behind a stream, gets a network close and holds no stream slot. And the replay: a
 * backlog written in pieces within FEED_STREAM_BUFFER_BYTES, and `?after=0` after a prune replaying what is kept.
 * On each store, over real sockets.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { buildTestApp, startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASES } from '../helpers/databases.js';
import { EventStreamClient } from '../helpers/event-stream.js';
import { plantJson } from '../helpers/plants.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { parsePrometheusText } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/wait.js';

stopPostgresAfterAll();

async function listening(t: TestApp): Promise<number> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return (t.app.server.address() as AddressInfo).port;
}

async function create(t: TestApp, id: number, name = `plant ${id}`): Promise<void> {
  const response = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: plantJson(String(id), name) });
  assert.equal(response.statusCode, 200, response.body);
}

/** A raw connection that sends `text` and collects everything answered, until it closes. */
async function rawConnection(context: TestContext, port: number, text: string): Promise<{ received: () => string; closed: Promise<unknown> }> {
  const socket = net.connect({ host: '127.0.0.1', port });
  context.after(() => socket.destroy());
  let received = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
  const closed = once(socket, 'close');
  await once(socket, 'connect');
  socket.write(text);
  return { received: () => received, closed };
}

const eventsRequest = (token: string, method = 'GET') => `${method} /plants/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`;

for (const database of DATABASES) {
  describe(`every way of asking for the event stream on ${database.kind}`, () => {
    const app = (context: TestContext, env: Record<string, string> = {}) => buildTestApp(context, database.create, { FEED_HEARTBEAT_MS: '50', ...env });

    it('answers a stream pipelined after GET /healthz, as one counted stream, and lets a shutdown end it', async (context) => {
      const t = await startTestApp(database.create, { FEED_HEARTBEAT_MS: '50' });
      let closed = false;
      context.after(async () => {
        if (!closed) await t.close();
      });
      const port = await listening(t);
      const connection = await rawConnection(context, port, `GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n${eventsRequest(t.token)}`);
      await waitFor('the pipelined stream to be live', () => t.services.feed.subscribers === 1);
      await create(t, 1);
      await waitFor('its event', () => connection.received().includes('data: {"id":1,"name":"plant 1"}'));
      assert.deepEqual(connection.received().match(/HTTP\/1\.1 \d{3}/g), ['HTTP/1.1 200', 'HTTP/1.1 200']);
      assert.match(connection.received(), /content-type: text\/event-stream/);
      const metrics = parsePrometheusText((await t.app.inject({ url: '/metrics', headers: t.headers })).body);
      assert.equal(metrics.value('plantstore_event_streams_open'), 1);
      await t.close();
      closed = true;
      await connection.closed;
    });

    it('answers HEAD with the head alone: no body, no stream, no slot', async (context) => {
      const t = await app(context, { FEED_STREAMS_PER_TOKEN: '1' });
      const port = await listening(t);
      const head = await rawConnection(context, port, eventsRequest(t.token, 'HEAD'));
      await head.closed;
      const [status, rest] = head.received().split('\r\n\r\n');
      assert.match(status ?? '', /^HTTP\/1\.1 200 OK\r\n/);
      assert.match(status ?? '', /content-type: text\/event-stream/);
      assert.equal(rest, '');
      assert.equal(t.services.feed.subscribers, 0);
      const stream = await EventStreamClient.open(`http://127.0.0.1:${port}/plants/events`, { authorization: `Bearer ${t.token}` });
      context.after(() => stream.close());
      assert.equal(stream.status, 200);
    });

    it('closes, holding no slot, a stream request behind an answer that closes its connection or behind a stream', async (context) => {
      const t = await app(context, { FEED_STREAMS_PER_TOKEN: '2' });
      const port = await listening(t);
      const closing = await rawConnection(context, port, `GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n${eventsRequest(t.token)}`);
      await closing.closed;
      assert.deepEqual(closing.received().match(/HTTP\/1\.1 \d{3}/g), ['HTTP/1.1 200']);
      const twice = await rawConnection(context, port, eventsRequest(t.token) + eventsRequest(t.token));
      await waitFor('the first stream to be live', () => t.services.feed.subscribers === 1);
      // The one behind it holds no slot: the token's second is free for another connection.
      const other = await EventStreamClient.open(`http://127.0.0.1:${port}/plants/events`, { authorization: `Bearer ${t.token}` });
      context.after(() => other.close());
      assert.equal(other.status, 200);
      await create(t, 1);
      await other.waitForEvents(1);
      await waitFor('the event on the pipelined connection', () => twice.received().includes('"plant 1"'));
      assert.deepEqual(twice.received().match(/HTTP\/1\.1 \d{3}/g), ['HTTP/1.1 200']);
    });

    it('writes a backlog in pieces within FEED_STREAM_BUFFER_BYTES, all of it, in order', async (context) => {
      const t = await app(context, { FEED_STREAM_BUFFER_BYTES: '1024', NAME_MAX_LENGTH: '4096', METRICS_CACHE_MS: '0' });
      const port = await listening(t);
      const name = 'n'.repeat(300);
      for (let id = 1; id <= 30; id += 1) await create(t, id, name);
      const stream = await EventStreamClient.open(`http://127.0.0.1:${port}/plants/events?after=0`, { authorization: `Bearer ${t.token}` });
      context.after(() => stream.close());
      const events = await stream.waitForEvents(30);
      assert.deepEqual(events.map((event) => JSON.parse(event.data).id as number), Array.from({ length: 30 }, (_, index) => index + 1));
      const bytes = events.reduce((sum, event) => sum + Buffer.byteLength(`event: ${event.event}\nid: ${event.id}\ndata: ${event.data}\n\n`), 0);
      const metrics = parsePrometheusText((await t.app.inject({ url: '/metrics', headers: t.headers })).body);
      const writes = metrics.value('plantstore_event_stream_writes_total') ?? 0;
      assert.ok(writes >= Math.ceil(bytes / 1024), `${bytes} bytes in ${writes} writes`);
    });

    it('replays at the pace of a reader that stops reading for a while: what waits for it stays within the bound', async (context) => {
      const bound = 64 * 1024;
      const t = await app(context, { FEED_STREAM_BUFFER_BYTES: String(bound), NAME_MAX_LENGTH: '4096' });
      const port = await listening(t);
      const sockets = new Set<net.Socket>();
      t.app.server.on('connection', (socket: net.Socket) => sockets.add(socket));
      // More than the kernel's socket buffers take in: what is left waits in the server's.
      const name = 'n'.repeat(4000);
      for (let from = 1n; from <= 1000n; from += 100n) {
        await t.store.plants.create(Array.from({ length: 100 }, (_, index) => ({ id: from + BigInt(index), name, tag: null })));
      }
      const stream = await EventStreamClient.open(`http://127.0.0.1:${port}/plants/events?after=0`, { authorization: `Bearer ${t.token}` });
      context.after(() => stream.close());
      stream.pause();
      let most = 0;
      for (let sample = 0; sample < 50; sample += 1) {
        for (const socket of sockets) most = Math.max(most, socket.writableLength);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // One event past the bound at most: a piece never starts beyond it.
      assert.ok(most <= bound + 4200, `${most} bytes waited for the reader`);
      stream.resume();
      const events = await stream.waitForEvents(1000);
      assert.deepEqual(events.map((event) => BigInt(event.id ?? -1)), Array.from({ length: 1000 }, (_, index) => BigInt(index + 1)));
    });

    it('replays every change kept for ?after=0 after a prune, in order, with no reset; an older cursor gets one', async (context) => {
      const t = await app(context, { FEED_RETENTION_COUNT: '100' });
      const port = await listening(t);
      for (let id = 1; id <= 130; id += 1) await create(t, id);
      assert.equal(await t.store.changes.pruneChanges(86_400_000, 100), 30);
      const oldest = (await t.store.changes.oldestRetained()) as bigint;
      const newest = await t.store.changes.newestSequence();
      assert.equal(newest - oldest, 99n);
      const all = await EventStreamClient.open(`http://127.0.0.1:${port}/plants/events?after=0`, { authorization: `Bearer ${t.token}` });
      context.after(() => all.close());
      const events = await all.waitForEvents(100);
      assert.deepEqual(events.map((event) => BigInt(event.id ?? -1)), Array.from({ length: 100 }, (_, index) => oldest + BigInt(index)));
      assert.ok(events.every((event) => event.event === 'plant.created'));
      const old = await EventStreamClient.open(`http://127.0.0.1:${port}/plants/events?after=1`, { authorization: `Bearer ${t.token}` });
      context.after(() => old.close());
      const [reset] = await old.waitForEvents(1);
      assert.equal(reset?.event, 'reset');
      assert.equal(reset?.id, String(newest));
    });
  });
}
