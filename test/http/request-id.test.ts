import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { InjectOptions } from 'fastify';
import { createLogger } from '../../src/observability/log.js';
import { buildTestApp, useTestApp } from '../helpers/app.js';
import { sqliteDatabase } from '../helpers/databases.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('X-Request-Id', () => {
  /** Every log line, at debug: the request lines are logged there. */
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger({ logLevel: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const t = useTestApp(sqliteDatabase, { BODY_LIMIT_BYTES: '1024' }, { log });
  let nextId = 1;

  const createBody = () => JSON.stringify({ id: nextId++, name: 'Fern' });

  /** A request of each kind the service answers, each status from where it is decided. */
  const cases = (): Array<[string, number, InjectOptions]> => [
    ['a create', 200, { method: 'POST', url: '/plants', headers: t.headers, payload: createBody() }],
    ['a read', 200, { method: 'GET', url: '/healthz' }],
    ['invalid JSON', 400, { method: 'POST', url: '/plants', headers: t.headers, payload: '{"id":' }],
    ['a path that is not valid percent-encoding (refused by the router)', 400, { method: 'GET', url: '/plants/%E0%A4%A' }],
    ['no token (onRequest)', 401, { method: 'POST', url: '/plants', headers: { 'content-type': 'application/json' }, payload: createBody() }],
    ['an unknown path (onRequest)', 404, { method: 'GET', url: '/no/such/path' }],
    ['a method the path does not take (onRequest)', 405, { method: 'PATCH', url: '/plants' }],
    ['a body over the limit', 413, { method: 'POST', url: '/plants', headers: t.headers, payload: JSON.stringify({ id: 1, name: 'x'.repeat(2000) }) }],
    ['another media type', 415, { method: 'POST', url: '/plants', headers: { ...t.headers, 'content-type': 'text/plain' }, payload: createBody() }],
  ];

  it('is generated (a UUID, new for each request) and sent back on every answer, errors included', async () => {
    const seen = new Set<string>();
    for (const [what, status, request] of cases()) {
      const response = await t.app.inject(request);
      assert.equal(response.statusCode, status, `${what}: ${response.body}`);
      const id = response.headers['x-request-id'];
      assert.match(String(id), UUID, what);
      assert.ok(!seen.has(String(id)), `${what}: a new id`);
      seen.add(String(id));
    }
  });

  it('keeps a valid incoming X-Request-Id, sends it back on every answer and logs it as reqId on every line of the request', async () => {
    for (const [what, status, request] of cases()) {
      const requestId = `client-${randomUUID()}`;
      const first = lines.length;
      const response = await t.app.inject({ ...request, headers: { ...request.headers, 'x-request-id': requestId } });
      assert.equal(response.statusCode, status, `${what}: ${response.body}`);
      assert.equal(response.headers['x-request-id'], requestId, what);
      const logged = lines.slice(first);
      assert.ok(logged.length > 0, `${what}: logged`);
      for (const line of logged) assert.equal(line.reqId, requestId, `${what}: ${JSON.stringify(line)}`);
    }
  });

  it('keeps and logs it on the 500 path, with the detail that the client does not get', async () => {
    const createPlants = t.store.plants.create.bind(t.store.plants);
    t.store.plants.create = () => Promise.reject(new Error('secret internal detail'));
    try {
      const first = lines.length;
      const response = await t.app.inject({ method: 'POST', url: '/plants', headers: { ...t.headers, 'x-request-id': 'trace-500' }, payload: createBody() });
      assert.equal(response.statusCode, 500);
      assert.equal(response.headers['x-request-id'], 'trace-500');
      const unhandled = lines.slice(first).filter((line) => line.msg === 'unhandled error');
      assert.equal(unhandled.length, 1);
      assert.equal(unhandled[0]?.reqId, 'trace-500');
    } finally {
      t.store.plants.create = createPlants;
    }
  });

  it('is sent back on a 429 of the rate limit too', async (context) => {
    const limited = await buildTestApp(context, sqliteDatabase, { RATE_LIMIT_MAX: '1', RATE_LIMIT_WINDOW_MS: '3600000' });
    const request = { method: 'GET' as const, url: '/plants', headers: { ...limited.headers, 'x-request-id': 'limited-1' } };
    assert.equal((await limited.app.inject(request)).statusCode, 200);
    const refused = await limited.app.inject(request);
    assert.equal(refused.statusCode, 429);
    assert.equal(refused.headers['x-request-id'], 'limited-1');
  });

  it('takes printable ASCII up to 128 characters as it is', async () => {
    for (const requestId of ['a', 'x'.repeat(128), ' !"#$%&\'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~', '550e8400-e29b-41d4-a716-446655440000']) {
      const response = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': requestId } });
      assert.equal(response.headers['x-request-id'], requestId);
    }
  });

  const invalid: Array<[string, string]> = [
    ['too long (129 characters)', 'x'.repeat(129)],
    ['with a control character', 'abc\u0001def'],
    ['with a tab', 'abc\tdef'],
    ['with a DEL', 'abc\u007fdef'],
    ['not ASCII', 'café'],
    ['empty', ''],
  ];
  for (const [what, requestId] of invalid) {
    it(`replaces one ${what} with a generated id, never echoing or logging it`, async () => {
      const first = lines.length;
      const response = await t.app.inject({ method: 'POST', url: '/plants', headers: { ...t.headers, 'x-request-id': requestId }, payload: createBody() });
      assert.equal(response.statusCode, 200);
      const id = String(response.headers['x-request-id']);
      assert.match(id, UUID);
      for (const line of lines.slice(first)) assert.equal(line.reqId, id);
    });
  }
});
