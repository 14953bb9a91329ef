/**
 * The sender against real servers on 127.0.0.1: what one attempt answers for each way a subscriber can answer (or
 * not), that a huge or endless answer is cut off at the body bound rather than read, that a short one leaves the
 * connection for the next attempt, and that shutdown cuts attempts short.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, it } from 'node:test';
import { systemResolver } from '../../src/webhooks/address-policy.js';
import { INTERRUPTED, WebhookSender, type WebhookRequest } from '../../src/webhooks/sender.js';
import { waitFor } from '../helpers/wait.js';

const TIME_LIMIT_MS = 300;
/**
 * The time limit of the tests that are not about it: a loaded machine took longer than 300 ms for a local request
 * and its 204, and a test of what is sent must not fail on how fast it went.
 */
const UNHURRIED_MS = 30_000;

describe('the webhook sender', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A server answering with `handle`; it records each request's client port, and its sockets are ended at cleanup. */
  async function serve(handle: (request: IncomingMessage, response: ServerResponse) => void) {
    const sockets = new Set<Socket>();
    const ports: number[] = [];
    const server: Server = createServer((request, response) => {
      ports.push(request.socket.remotePort ?? 0);
      handle(request, response);
    });
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook?x=1`, ports, sockets };
  }

  function sender(timeoutMs = TIME_LIMIT_MS) {
    const made = new WebhookSender({ timeoutMs, allowPrivateNetworks: true, resolve: systemResolver, connectionsPerOrigin: 4 });
    cleanups.push(() => made.close());
    return made;
  }

  const message = (url: string): WebhookRequest => ({
    url,
    id: 'msg_p_9223372036854775807',
    timestampSeconds: 1_767_225_600,
    body: '{"id":9223372036854775807,"name":"fern"}',
    signature: 'v1,abc',
  });

  it('sends the POST with its headers and body to the path and query, and answers the status', async () => {
    let seen: { method?: string; url?: string; headers?: IncomingMessage['headers']; body?: string } = {};
    const server = await serve((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        seen = { method: request.method, url: request.url, headers: request.headers, body: Buffer.concat(chunks).toString() };
        response.writeHead(204).end();
      });
    });
    assert.deepEqual(await sender(UNHURRIED_MS).send(message(server.url)), { status: 204, error: null });
    assert.equal(seen.method, 'POST');
    assert.equal(seen.url, '/hook?x=1');
    assert.equal(seen.body, '{"id":9223372036854775807,"name":"fern"}');
    assert.equal(seen.headers?.['content-type'], 'application/json');
    assert.equal(seen.headers?.['webhook-id'], 'msg_p_9223372036854775807');
    assert.equal(seen.headers?.['webhook-timestamp'], '1767225600');
    assert.equal(seen.headers?.['webhook-signature'], 'v1,abc');
  });

  it('reuses the connection after a short answer', async () => {
    const server = await serve((request, response) => {
      request.resume();
      request.on('end', () => response.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
    });
    const sending = sender(UNHURRIED_MS);
    for (let i = 0; i < 10; i += 1) assert.equal((await sending.send(message(server.url))).status, 200);
    // undici may open a second connection while the first is being handed back to its pool; not one per attempt.
    assert.ok(new Set(server.ports).size <= 2, `client ports ${server.ports.join(', ')}`);
  });

  it('cuts off an endless answer at the body bound, answering its status long before the time limit', async () => {
    const megabyte = Buffer.alloc(1 << 20, 'x');
    const server = await serve((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/plain' });
      const more = () => {
        while (!response.destroyed && response.write(megabyte));
        if (!response.destroyed) response.once('drain', more);
      };
      more();
    });
    const started = performance.now();
    assert.deepEqual(await sender().send(message(server.url)), { status: 200, error: null });
    assert.ok(performance.now() - started < TIME_LIMIT_MS / 2, `took ${performance.now() - started} ms`);
    // The connection is dropped, not kept for a next attempt that would read the rest.
    const deadline = performance.now() + 2000;
    while (server.sockets.size > 0 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(server.sockets.size, 0);
  });

  it('answers a status whose body trickles past the time limit at the time limit, with that status', async () => {
    const server = await serve((request, response) => {
      request.resume();
      response.writeHead(503, { 'retry-after': '7' });
      const timer = setInterval(() => response.write('.'), 50);
      response.on('close', () => clearInterval(timer));
    });
    const started = performance.now();
    assert.deepEqual(await sender().send(message(server.url)), { status: 503, error: null, retryAfterMs: 7000 });
    const took = performance.now() - started;
    assert.ok(took >= TIME_LIMIT_MS - 20 && took < TIME_LIMIT_MS + 500, `took ${took} ms`);
  });

  it('times out when no answer comes, and skips interim 1xx answers', async () => {
    const silent = await serve(() => undefined);
    const started = performance.now();
    assert.deepEqual(await sender().send(message(silent.url)), { status: null, error: `timed out after ${TIME_LIMIT_MS} ms` });
    assert.ok(performance.now() - started >= TIME_LIMIT_MS - 20);
    const interim = await serve((request, response) => {
      request.resume();
      response.writeProcessing();
      setTimeout(() => response.writeHead(202).end(), 20);
    });
    assert.deepEqual(await sender().send(message(interim.url)), { status: 202, error: null });
  });

  it('answers a redirect as its status without following it', async () => {
    const target = await serve((request, response) => response.writeHead(204).end());
    const redirecting = await serve((request, response) => {
      request.resume();
      response.writeHead(302, { location: target.url }).end();
    });
    assert.deepEqual(await sender(UNHURRIED_MS).send(message(redirecting.url)), { status: 302, error: null });
    assert.equal(target.ports.length, 0);
  });

  it('answers a refused connection as an error naming it', async () => {
    const closed = await serve(() => undefined);
    const url = closed.url;
    await cleanups.pop()?.();
    const answer = await sender().send(message(url));
    assert.equal(answer.status, null);
    assert.match(String(answer.error), /ECONNREFUSED/);
  });

  it('interrupt() cuts attempts in flight short at once and refuses later ones', async () => {
    const silent = await serve(() => undefined);
    const sending = sender();
    const pending = sending.send(message(silent.url));
    // In flight: the request has reached the receiver, which never answers (waited for, not timed: a loaded machine
    // had not even connected 30 ms after the send).
    await waitFor('the request to reach the receiver', () => silent.ports.length === 1);
    const started = performance.now();
    sending.interrupt();
    assert.deepEqual(await pending, { status: null, error: INTERRUPTED });
    assert.ok(performance.now() - started < 50);
    assert.equal(sending.interrupted, true);
    assert.deepEqual(await sending.send(message(silent.url)), { status: null, error: INTERRUPTED });
    assert.equal(silent.ports.length, 1);
  });
});
