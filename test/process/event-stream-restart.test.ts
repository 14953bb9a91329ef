/**
 * What a client asking for GET /plants/events gets at each moment of a restart, on a real process: a 200
 * text/event-stream, or a network error (refused, reset, closed unanswered), both of which a browser's EventSource
 * follows by reconnecting. Never another answer: an EventSource that gets any status but 200, or a type but
 * text/event-stream, fails for good (WHATWG HTML, "Server-sent events"), and its page shows stale data with no error.
 * The requests come from the first moment the port accepts while the server starts; on new connections throughout a
 * graceful shutdown; and on connections the server accepted before SIGTERM, once the shutdown has ended its streams.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sqliteDatabase } from '../helpers/databases.js';
import { EventStreamClient } from '../helpers/event-stream.js';
import { createToken, freePort, startServer } from '../helpers/process.js';

/** Every request here opens a stream: the per-token and per-address stream limits are not what is tested. */
const ENV = { FEED_POLL_MS: '3600000', FEED_STREAMS_PER_TOKEN: '1000', FEED_STREAMS_PER_ADDRESS: '1000' };

interface Outcome {
  /** The answer's status, type and (with `untilClose`) body; undefined for a network error. */
  readonly answer?: { readonly status: number; readonly type: string; readonly body: string };
  readonly networkError?: string;
}

/**
 * Sends the stream request on `socket` (connected or connecting) and resolves with what came back: once the head
 * has arrived, or with `untilClose` once the server has closed the connection.
 */
function ask(socket: Socket, token: string, untilClose: boolean): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    let data = '';
    let head: { status: number; type: string; end: number } | undefined;
    const settle = (outcome: Outcome) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer and no close within 20 s; received ${JSON.stringify(data.slice(0, 300))}`));
    }, 20_000);
    const request = () =>
      socket.write(`GET /plants/events?access_token=${token} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nLast-Event-ID: 0\r\n\r\n`);
    if (socket.connecting) socket.once('connect', request);
    else request();
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
      const end = data.indexOf('\r\n\r\n');
      if (head || end === -1) return;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1]);
      head = { status, type: /\r\ncontent-type: *([^\r;]*)/i.exec(data.slice(0, end))?.[1] ?? '', end: end + 4 };
      if (!untilClose || status !== 200) settle({ answer: { status, type: head.type, body: data.slice(head.end) } });
    });
    socket.on('error', (error: NodeJS.ErrnoException) => settle(head ? { answer: { ...head, body: data.slice(head.end) } } : { networkError: error.code ?? error.message }));
    socket.on('close', () => settle(head ? { answer: { ...head, body: data.slice(head.end) } } : { networkError: 'closed unanswered' }));
  });
}

/** What a browser would do next after `outcome`: undefined when it reconnects, else why its EventSource ends. */
function endsEventSource(outcome: Outcome): string | undefined {
  if (outcome.networkError !== undefined) return undefined;
  const { status, type, body } = outcome.answer as NonNullable<Outcome['answer']>;
  return status === 200 && type === 'text/event-stream' ? undefined : `${status} ${type} ${body.slice(0, 200)}`;
}

/** Asks on a new connection every few milliseconds until `stop()`; resolves with every outcome. */
function hammer(port: number, token: string): { stop(): Promise<Outcome[]> } {
  const outcomes: Outcome[] = [];
  let stopping = false;
  const running = (async () => {
    while (!stopping) {
      outcomes.push(await ask(connect(port, '127.0.0.1'), token, false));
      await sleep(5);
    }
  })();
  return {
    async stop() {
      stopping = true;
      await running;
      return outcomes;
    },
  };
}

/** A connection that has had one answer and is idle, kept alive: as a browser's, after it loaded the page. */
async function keptAlive(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await new Promise((resolve) => socket.once('data', resolve));
  return socket;
}

describe('GET /plants/events across a restart', () => {
  it('while the server starts: refused until it listens, then the stream; never an answer that ends an EventSource', async (context) => {
    const db = await sqliteDatabase();
    context.after(() => db.cleanup());
    const env = { DATABASE_URL: db.url, ...ENV };
    const token = createToken('browser', env, undefined, ['--read-only']);
    const port = await freePort();
    const asking = hammer(port, token);
    const server = await startServer(env, { port });
    context.after(() => server.kill());
    await sleep(200);
    const outcomes = await asking.stop();
    assert.deepEqual(outcomes.map(endsEventSource).filter((why) => why !== undefined), []);
    assert.ok(outcomes.some((outcome) => outcome.networkError !== undefined), 'asked before it listened');
    assert.ok(outcomes.some((outcome) => outcome.answer?.status === 200), 'asked once it listened');
  });

  it('while it shuts down: on new connections and on ones it accepted before, the stream or a network error', async (context) => {
    const db = await sqliteDatabase();
    context.after(() => db.cleanup());
    const env = { DATABASE_URL: db.url, ...ENV };
    const token = createToken('browser', env, undefined, ['--read-only']);
    const server = await startServer(env);
    context.after(() => server.kill());
    const stream = await EventStreamClient.open(`${server.base}/plants/events?access_token=${token}`);
    context.after(() => stream.close());
    assert.equal(stream.status, 200);
    const idle = await Promise.all([1, 2, 3].map(() => keptAlive(server.port)));
    const asking = hammer(server.port, token);
    const stopped = server.stop('SIGTERM');
    // The stream ends when the shutdown ends every stream: from then on the server is closing, and the connections
    // it accepted before are still open for a grace (src/http/graceful-close.ts).
    await stream.ended;
    const onIdle = await Promise.all(idle.map((socket) => ask(socket, token, true)));
    assert.deepEqual(await stopped, { code: 0, signal: null });
    const outcomes = [...onIdle, ...(await asking.stop())];
    assert.deepEqual(outcomes.map(endsEventSource).filter((why) => why !== undefined), []);
    // A stream asked for once the streams were ended ends at once, saying when to come back.
    for (const outcome of onIdle) if (outcome.answer) assert.equal(outcome.answer.body, 'retry: 2000\n\n');
  });
});
