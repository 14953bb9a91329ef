/**
 * The change feed from outside, on real processes (docs/event-stream.md): a client that
 * resumes with the last id it saw gets exactly the changes after it, no gap and no duplicate, after the server was
 * stopped by SIGTERM or killed by SIGKILL and started again on the same database; two instances on one PostgreSQL
 * database share one sequence, and a stream on one sees the other's creates and deletes in sequence order; with
 * worker threads on SQLite, a stream on any thread hears the main thread's commits. The fallback poll is set to an
 * hour, so what is delivered here was delivered by the wake-up of each commit.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import net from 'node:net';
import { describe, it } from 'node:test';
import { DATABASES, postgresDatabase } from '../helpers/databases.js';
import { EventStreamClient, type ReceivedEvent } from '../helpers/event-stream.js';
import { INT64_MAX, INT64_MIN, PAST_DOUBLE } from '../helpers/plants.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { CLI, createToken, startServer, type ServerProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';
import { OtlpReceiver } from '../helpers/otlp.js';
import { randomBytes } from 'node:crypto';

stopPostgresAfterAll();

const FEED_ENV = { FEED_POLL_MS: '3600000', FEED_HEARTBEAT_MS: '200' };

async function create(server: ServerProcess, token: string, id: string, name: string): Promise<void> {
  const response = await fetch(`${server.base}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: `{"id":${id},"name":${JSON.stringify(name)}}`,
  });
  assert.equal(response.status, 200, await response.text());
}

async function remove(server: ServerProcess, token: string, id: string): Promise<void> {
  const response = await fetch(`${server.base}/plants/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
  assert.equal(response.status, 204, await response.text());
}

function open(server: ServerProcess, token: string, cursor?: { lastEventId?: string; after?: string }): Promise<EventStreamClient> {
  const query = cursor?.after === undefined ? '' : `?after=${cursor.after}`;
  return EventStreamClient.open(`${server.base}/plants/events${query}`, {
    authorization: `Bearer ${token}`,
    ...(cursor?.lastEventId === undefined ? {} : { 'last-event-id': cursor.lastEventId }),
  });
}

const lines = (events: readonly ReceivedEvent[]) => events.map(({ event, id, data }) => `${id} ${event} ${data}`);

for (const database of DATABASES) {
  describe(`the change feed across restarts on ${database.kind}`, () => {
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      it(`resumes exactly after ${signal} and a restart, by Last-Event-ID`, async (context) => {
        const db = await database.create();
        context.after(() => db.cleanup());
        const env = { DATABASE_URL: db.url, ...FEED_ENV };
        const token = createToken('feed', env);
        let server = await startServer(env);
        context.after(() => server.kill());
        const stream = await open(server, token, { after: '0' });
        context.after(() => stream.close());
        assert.equal(stream.status, 200);
        for (let id = 1; id <= 5; id += 1) await create(server, token, String(id), `plant ${id}`);
        const seen = await stream.waitForEvents(5);
        const exit = await server.stop(signal);
        if (signal === 'SIGTERM') assert.deepEqual(exit, { code: 0, signal: null });
        // SIGTERM ends the stream cleanly; SIGKILL leaves the kernel to reset it.
        await stream.ended;
        server = await startServer(env);
        for (let id = 6; id <= 7; id += 1) await create(server, token, String(id), `plant ${id}`);
        await remove(server, token, '2');
        // Resume from the third event, as a client that had read only that far would.
        const lastSeen = seen[2]?.id as string;
        const resumed = await open(server, token, { lastEventId: lastSeen });
        context.after(() => resumed.close());
        const first = BigInt(lastSeen);
        const expected = [
          `${first + 1n} plant.created {"id":4,"name":"plant 4"}`,
          `${first + 2n} plant.created {"id":5,"name":"plant 5"}`,
          `${first + 3n} plant.created {"id":6,"name":"plant 6"}`,
          `${first + 4n} plant.created {"id":7,"name":"plant 7"}`,
          `${first + 5n} plant.deleted {"id":2}`,
        ];
        assert.deepEqual(lines(await resumed.waitForEvents(5)), expected);
        await create(server, token, '8', 'live');
        assert.deepEqual(lines((await resumed.waitForEvents(6)).slice(5)), [`${first + 6n} plant.created {"id":8,"name":"live"}`]);
        assert.equal(resumed.events.length, 6, 'no duplicate');
      });
    }
  });
}

describe('the change feed of two instances on one PostgreSQL database', () => {
  it('a stream on A sees the creates and deletes made on B and on A, in sequence order, ids exact', async (context) => {
    const db = await postgresDatabase();
    context.after(() => db.cleanup());
    const env = { DATABASE_URL: db.url, ...FEED_ENV };
    const token = createToken('feed', env);
    const a = await startServer(env);
    context.after(() => a.kill());
    const b = await startServer(env);
    context.after(() => b.kill());
    const stream = await open(a, token);
    context.after(() => stream.close());
    const ids = [PAST_DOUBLE, INT64_MIN, INT64_MAX, '1', '2', '3', '4', '5'];
    // Both instances write at once: the sequence orders their commits.
    await Promise.all(ids.map((id, index) => create(index % 2 === 0 ? b : a, token, id, `plant ${id}`)));
    await remove(b, token, PAST_DOUBLE);
    const events = await stream.waitForEvents(ids.length + 1);
    const sequences = events.map((event) => BigInt(event.id as string));
    sequences.slice(1).forEach((sequence, index) => assert.equal(sequence, (sequences[index] as bigint) + 1n, 'one after another, no gap'));
    const created = events.filter((event) => event.event === 'plant.created').map((event) => event.data);
    assert.deepEqual(created.sort(), ids.map((id) => `{"id":${id},"name":"plant ${id}"}`).sort());
    assert.equal(events.at(-1)?.event, 'plant.deleted');
    assert.equal(events.at(-1)?.data, `{"id":${PAST_DOUBLE}}`);
    // A stream on B resumes from A's ids: one sequence for the database.
    const onB = await open(b, token, { lastEventId: events[3]?.id as string });
    context.after(() => onB.close());
    assert.deepEqual(lines(await onB.waitForEvents(events.length - 4)), lines(events.slice(4)));
  });
});

describe('the change feed with worker threads on SQLite', () => {
  it('streams on every thread hear the commits of the main thread, the one writer', async (context) => {
    const db = await DATABASES[0].create();
    context.after(() => db.cleanup());
    const env = { DATABASE_URL: db.url, WORKERS: '3', ...FEED_ENV };
    const token = createToken('feed', env);
    const server = await startServer(env);
    context.after(() => server.kill());
    // Each on a connection of its own; the kernel spreads them over the threads.
    const streams = await Promise.all(Array.from({ length: 9 }, () => open(server, token)));
    context.after(() => streams.forEach((stream) => stream.close()));
    for (const stream of streams) await stream.waitForComment();
    await create(server, token, PAST_DOUBLE, 'everywhere');
    for (const stream of streams) assert.equal((await stream.waitForEvents(1))[0]?.data, `{"id":${PAST_DOUBLE},"name":"everywhere"}`);
  });
});

describe('plantstore watch', () => {
  it('prints one exact JSON line per change and resumes by itself across a server restart, no gap and no duplicate', async (context) => {
    const db = await DATABASES[0].create();
    context.after(() => db.cleanup());
    const env = { DATABASE_URL: db.url, ...FEED_ENV };
    const token = createToken('watcher', env, undefined, ['--read-only']);
    const writer = createToken('writer', env);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-watch-'));
    context.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    let server = await startServer(env);
    context.after(() => server.kill());
    await create(server, writer, '1', 'before');
    const watch = spawn(process.execPath, [CLI, 'watch', '--url', server.base, '--token-file', tokenFile, '--after', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => watch.once('exit', (code) => resolve(code)));
    context.after(() => watch.kill('SIGKILL'));
    let stdout = '';
    watch.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    watch.stderr.resume();
    const printed = () => stdout.split('\n').filter((line) => line !== '');
    await create(server, writer, PAST_DOUBLE, 'exact');
    await waitFor('two lines', () => printed().length >= 2, { timeoutMs: 60_000 });
    await server.stop('SIGTERM');
    server = await startServer(env, { port: server.port });
    await create(server, writer, INT64_MIN, 'after the restart');
    await remove(server, writer, '1');
    await waitFor('four lines', () => printed().length >= 4, { timeoutMs: 60_000 });
    watch.kill('SIGINT');
    assert.equal(await exited, 0);
    const lines = printed();
    const first = BigInt(/^\{"sequence":(\d+),/.exec(lines[0] ?? '')?.[1] ?? '0');
    assert.deepEqual(lines, [
      `{"sequence":${first},"event":"plant.created","data":{"id":1,"name":"before"}}`,
      `{"sequence":${first + 1n},"event":"plant.created","data":{"id":${PAST_DOUBLE},"name":"exact"}}`,
      `{"sequence":${first + 2n},"event":"plant.created","data":{"id":${INT64_MIN},"name":"after the restart"}}`,
      `{"sequence":${first + 3n},"event":"plant.deleted","data":{"id":1}}`,
    ]);
  });
});

describe('the change feed, traced', () => {
  it('is one server span per stream, ended when the client leaves, with no token in it', async (context) => {
    const db = await DATABASES[0].create();
    context.after(() => db.cleanup());
    const collector = await OtlpReceiver.start();
    context.after(() => collector.close());
    const env = { DATABASE_URL: db.url, ...FEED_ENV };
    const token = createToken('traced', env);
    const server = await startServer({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    context.after(() => server.kill());
    const traceId = randomBytes(16).toString('hex');
    const stream = await EventStreamClient.open(`${server.base}/plants/events?access_token=${token}`, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` });
    await create(server, token, '1', 'traced');
    await stream.waitForEvents(1);
    stream.close();
    const spans = await collector.waitForSpans((found) => found.some((span) => span.traceId === traceId && span.kind === 2));
    const mine = spans.filter((span) => span.traceId === traceId && span.kind === 2);
    assert.deepEqual(mine.map((span) => span.name), ['GET /plants/events']);
    assert.ok(!JSON.stringify(spans).includes(token));
    await server.stop();
  });
});

describe('the change feed, asked for on pipelined connections', () => {
  it('exits 0 at SIGTERM with streams pipelined after GET /healthz beside plain ones: each is a stream that ends', async (context) => {
    const db = await DATABASES[0].create();
    context.after(() => db.cleanup());
    const env = { DATABASE_URL: db.url, ...FEED_ENV };
    const token = createToken('pipelined', env);
    const server = await startServer(env);
    context.after(() => server.kill());
    const plain = await Promise.all([1, 2, 3, 4, 5].map(() => open(server, token)));
    const sockets = [1, 2, 3, 4, 5].map(() => net.connect({ host: '127.0.0.1', port: server.port }));
    const received = sockets.map(() => '');
    sockets.forEach((socket, index) => {
      context.after(() => socket.destroy());
      socket.setEncoding('utf8').on('data', (chunk: string) => (received[index] += chunk));
      socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /plants/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    });
    const closed = sockets.map((socket) => once(socket, 'close'));
    await waitFor('every pipelined stream to be answered', () => received.every((text) => text.includes('retry: 2000')));
    await create(server, token, '1', 'seen by all ten');
    await waitFor('the event on each pipelined stream', () => received.every((text) => text.includes('"seen by all ten"')));
    for (const stream of plain) await stream.waitForEvents(1);
    assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null });
    await Promise.all([...closed, ...plain.map((stream) => stream.ended)]);
  });
});
