/**
 * The client's retries against a fake server (node:http on 127.0.0.1) that answers what each test scripts: 503 with
 * Retry-After is waited out and retried within the budget, a 409 and a 400 never are, a network error is.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { after, describe, it } from 'node:test';
import { PlantConflictError, PlantStore, PlantStoreError } from '../../src/client/index.js';

type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'reset';

/** A server answering the n-th request (0-based) as `script` says, recording every request's method, URL and body. */
async function fakeServer(script: (index: number) => Answer): Promise<{ server: Server; url: string; requests: Array<{ method: string; url: string; body: string }> }> {
  const requests: Array<{ method: string; url: string; body: string }> = [];
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const answer = script(requests.length);
      requests.push({ method: request.method ?? '', url: request.url ?? '', body: Buffer.concat(chunks).toString() });
      if (answer === 'reset') {
        request.socket.destroy();
        return;
      }
      response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      response.end(answer.body ?? '');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, requests };
}

const unavailable: Answer = { status: 503, headers: { 'retry-after': '1' }, body: '{"error":503,"message":"storage is unavailable"}' };

describe('client retries', () => {
  const servers: Server[] = [];
  after(() => {
    for (const server of servers) server.close();
  });

  it('a create answered 503 with Retry-After: 1 twice succeeds on the third attempt, after waiting, in three requests', async () => {
    const fake = await fakeServer((index) => (index < 2 ? unavailable : { status: 200, body: '{"name":"Fern"}' }));
    servers.push(fake.server);
    const started = performance.now();
    const plant = await new PlantStore({ url: fake.url, token: 't' }).create({ id: 2n ** 63n - 1n, name: 'Fern' });
    assert.deepEqual(plant, { name: 'Fern' });
    assert.equal(fake.requests.length, 3);
    assert.ok(fake.requests.every((request) => request.body === '{"id":9223372036854775807,"name":"Fern"}'), 'the same body each time, id exact');
    // Retry-After is honoured: two waits of at least a second each (a lower bound only).
    assert.ok(performance.now() - started >= 2000, 'waited out both Retry-After');
  });

  it('gives up once the attempts are spent, with the last answer as a PlantStoreError carrying retryAfter', async () => {
    const fake = await fakeServer(() => unavailable);
    servers.push(fake.server);
    const client = new PlantStore({ url: fake.url, token: 't', retry: { attempts: 2 } });
    await assert.rejects(client.get(1n), (error) => error instanceof PlantStoreError && error.status === 503 && error.retryAfter === 1 && error.message === 'storage is unavailable');
    assert.equal(fake.requests.length, 2);
  });

  it('a 409 is a PlantConflictError at once, never retried', async () => {
    const fake = await fakeServer(() => ({ status: 409, body: '{"error":409,"message":"a plant with id 1 already exists with a different name or tag"}' }));
    servers.push(fake.server);
    await assert.rejects(new PlantStore({ url: fake.url }).create({ id: 1n, name: 'Ivy' }), (error) => error instanceof PlantConflictError && error.error === 409);
    assert.equal(fake.requests.length, 1);
  });

  it('a 400 is not retried either; a network error is', async () => {
    const bad = await fakeServer(() => ({ status: 400, body: '{"error":400,"message":"body/name must NOT have fewer than 1 characters"}' }));
    servers.push(bad.server);
    await assert.rejects(new PlantStore({ url: bad.url }).create({ id: 1n, name: '' }), (error) => error instanceof PlantStoreError && error.status === 400);
    assert.equal(bad.requests.length, 1);
    const flaky = await fakeServer((index) => (index === 0 ? 'reset' : { status: 200, body: '{"id":-9223372036854775808,"name":"Fern"}' }));
    servers.push(flaky.server);
    const client = new PlantStore({ url: flaky.url, retry: { baseDelayMs: 10 } });
    assert.deepEqual(await client.get(-(2n ** 63n)), { id: -(2n ** 63n), name: 'Fern' });
    assert.equal(flaky.requests.length, 2);
  });

  it('a Retry-After longer than the longest wait allowed ends the retries at once', async () => {
    const fake = await fakeServer(() => ({ ...unavailable, headers: { 'retry-after': '3600' } }));
    servers.push(fake.server);
    await assert.rejects(new PlantStore({ url: fake.url }).delete(5n), (error) => error instanceof PlantStoreError && error.retryAfter === 3600);
    assert.equal(fake.requests.length, 1);
  });
});
