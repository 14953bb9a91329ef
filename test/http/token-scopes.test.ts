import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { SCOPES, SCOPE_ACTIONS, type Scope } from '../../src/auth/scopes.js';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import type { Store } from '../../src/storage/store.js';
import { buildTestApp, useTestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { FakeClock } from '../helpers/clock.js';
import { DATABASES, postgresDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { newToken } from '../helpers/tokens.js';

stopPostgresAfterAll();

/**
 * Least privilege, in-process on both databases: each operation needs its one scope, and a token without it is
 * refused with 403 before anything is parsed, read, written or emitted; an expired token is refused with 401 from its
 * expiry on, by the clock of each request rather than the cache's last reload.
 */

const EXPIRED_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token", error_description="the token has expired"';
const insufficient = (scope: Scope) => `Bearer realm="plantstore", error="insufficient_scope", scope="${scope}"`;
const lacking = (scope: Scope) => `this token may not ${SCOPE_ACTIONS[scope]}: it lacks the ${scope} scope`;

/** The plant sub-store's methods, each counting its calls: a refused request must make none. */
type PlantCall = 'create' | 'get' | 'list' | 'delete';

function countPlantCalls(store: Store): Record<PlantCall, number> {
  const counts: Record<PlantCall, number> = { create: 0, get: 0, list: 0, delete: 0 };
  const counting =
    <A extends unknown[], R>(name: PlantCall, original: (...args: A) => R) =>
    (...args: A): R => {
      counts[name] += 1;
      return original(...args);
    };
  const { plants } = store;
  plants.create = counting('create', plants.create.bind(plants));
  plants.get = counting('get', plants.get.bind(plants));
  plants.list = counting('list', plants.list.bind(plants));
  plants.delete = counting('delete', plants.delete.bind(plants));
  return counts;
}

interface Operation {
  readonly name: string;
  readonly scope: Scope;
  /** The request, on the plant `id` (stored beforehand, except for the create, whose id is new). */
  request(id: bigint): { method: 'POST' | 'GET' | 'HEAD' | 'DELETE'; url: string; payload?: string };
  readonly success: number;
  /** The one store call the operation makes when allowed. */
  readonly call: PlantCall;
}

const OPERATIONS: readonly Operation[] = [
  { name: 'POST /plants', scope: 'plants:create', request: (id) => ({ method: 'POST', url: '/plants', payload: `{"id":${id},"name":"new"}` }), success: 200, call: 'create' },
  { name: 'GET /plants', scope: 'plants:read', request: () => ({ method: 'GET', url: '/plants?limit=1' }), success: 200, call: 'list' },
  { name: 'HEAD /plants', scope: 'plants:read', request: () => ({ method: 'HEAD', url: '/plants?limit=1' }), success: 200, call: 'list' },
  { name: 'GET /plants/{id}', scope: 'plants:read', request: (id) => ({ method: 'GET', url: `/plants/${id}` }), success: 200, call: 'get' },
  { name: 'DELETE /plants/{id}', scope: 'plants:delete', request: (id) => ({ method: 'DELETE', url: `/plants/${id}` }), success: 204, call: 'delete' },
];

/** The combinations that matter: each scope alone, all of them, and every set lacking exactly one. */
const GRANTS: Readonly<Record<string, readonly Scope[]>> = {
  'plants:read alone': ['plants:read'],
  'plants:create alone': ['plants:create'],
  'plants:delete alone': ['plants:delete'],
  'every scope': SCOPES,
  'all but plants:read': ['plants:create', 'plants:delete'],
  'all but plants:create': ['plants:read', 'plants:delete'],
  'all but plants:delete': ['plants:read', 'plants:create'],
};

for (const database of DATABASES) {
  describe(`token scopes and expiry, in-process on ${database.kind}`, () => {
    const t = useTestApp(database.create);
    /** The token of each grant, by the grant's name. */
    const tokens = new Map<string, string>();
    let nextId = 1n;

    before(async () => {
      for (const [grant, scopes] of Object.entries(GRANTS)) {
        const token = generateToken();
        await t.store.tokens.add(newToken(`grant-${grant.replaceAll(/[^a-z]+/g, '-')}`, hashToken(token), { scopes }));
        tokens.set(grant, token);
      }
    });

    for (const operation of OPERATIONS) {
      for (const [grant, scopes] of Object.entries(GRANTS)) {
        const allowed = scopes.includes(operation.scope);
        it(`${operation.name} with ${grant}: ${allowed ? operation.success : `403, nothing read or written`}`, async () => {
          const id = nextId++;
          await t.store.plants.create([{ id, name: 'stored', tag: null }]);
          const newId = 1_000_000n + id;
          const calls = countPlantCalls(t.store);
          const { method, url, payload } = operation.request(operation.call === 'create' ? newId : id);
          const response = await t.app.inject({
            method,
            url,
            headers: { authorization: `Bearer ${tokens.get(grant)}`, ...(payload ? { 'content-type': 'application/json' } : {}) },
            ...(payload ? { payload } : {}),
          });
          if (allowed) {
            assert.equal(response.statusCode, operation.success, response.body);
            assert.equal(response.headers['www-authenticate'], undefined);
            assert.equal(calls[operation.call], 1);
            return;
          }
          if (method === 'HEAD') assert.equal(response.statusCode, 403);
          else assertErrorRecord(response, 403, lacking(operation.scope));
          assert.equal(response.headers['www-authenticate'], insufficient(operation.scope));
          assert.deepEqual(calls, { create: 0, get: 0, list: 0, delete: 0 });
          // Nothing written: the stored plant is still there, the new one was not created (nor any event for it).
          assert.deepEqual(await t.store.plants.get(id), { id, name: 'stored', tag: null });
          assert.equal(await t.store.plants.get(newId), undefined);
        });
      }
    }

    it('refuses a token without plants:create before reading its body: not 413, 400 or 415, but 403', async () => {
      const headers = { authorization: `Bearer ${tokens.get('plants:read alone')}`, 'content-type': 'application/json' };
      const post = (payload: string, extra: Record<string, string> = {}) =>
        t.app.inject({ method: 'POST', url: '/plants', headers: { ...headers, ...extra }, payload });
      const cases: Array<[string, LightMyRequestResponse]> = [
        ['larger than BODY_LIMIT_BYTES', await post(`{"id":1,"name":"${'x'.repeat(10 * t.config.limits.bodyBytes)}"}`)],
        ['not JSON', await post('{"id":')],
        ['not application/json', await post('{"id":1,"name":"a"}', { 'content-type': 'text/plain' })],
        ['against the schema', await post('{"id":"one"}')],
      ];
      for (const [what, response] of cases) {
        assertErrorRecord(response, 403, lacking('plants:create'));
        assert.equal(response.headers['www-authenticate'], insufficient('plants:create'), what);
      }
    });

    it('refuses a token from its expiry on, by the clock of each request, even with a long cache period', async (context) => {
      const clock = new FakeClock(Date.now());
      // A minute-long cache: only a per-request comparison can refuse the token at its expiry.
      const local = await buildTestApp(context, t.databaseUrl, { TOKEN_CACHE_MS: '60000' }, { wallClock: clock.now });
      const token = generateToken();
      const name = `expiring-${randomUUID()}`;
      const expiresAt = new Date(clock.now() + 90_000);
      await local.store.tokens.add(newToken(name, hashToken(token), { scopes: ['plants:read'], expiresAt }));
      const all = local.store.tokens.all.bind(local.store.tokens);
      let reloads = 0;
      local.store.tokens.all = () => {
        reloads += 1;
        return all();
      };
      const read = () => local.app.inject({ method: 'GET', url: '/plants?limit=1', headers: { authorization: `Bearer ${token}` } });
      assert.equal((await read()).statusCode, 200);
      clock.advance(89_999);
      assert.equal((await read()).statusCode, 200, 'valid until its last millisecond');
      const readsBefore = reloads;
      clock.advance(1);
      for (let attempt = 0; attempt < 3; attempt += 1) {
        const response = await read();
        assertErrorRecord(response, 401, 'the token has expired');
        assert.equal(response.headers['www-authenticate'], EXPIRED_CHALLENGE);
      }
      // Known and expired: refused from the cache, not taken for a new token that would send every request to the store.
      assert.equal(reloads, readsBefore);
      // Still listed, with its expiry, until revoked: the operator sees what expired.
      const listed = (await local.store.tokens.list()).find((info) => info.name === name);
      assert.deepEqual(listed?.expiresAt, expiresAt);
      assert.equal(await local.store.tokens.revoke(name), true);
    });

    it('refuses an expired token at once when TOKEN_CACHE_MS is 0, and a valid token keeps working meanwhile', async (context) => {
      const clock = new FakeClock(Date.now());
      const local = await buildTestApp(context, t.databaseUrl, { TOKEN_CACHE_MS: '0' }, { wallClock: clock.now });
      const token = generateToken();
      await local.store.tokens.add(newToken(`uncached-${randomUUID()}`, hashToken(token), { expiresAt: new Date(clock.now() + 60_000) }));
      const post = (bearer: string) =>
        local.app.inject({ method: 'POST', url: '/plants', headers: { ...local.headers, authorization: `Bearer ${bearer}` }, payload: `{"id":${nextId++},"name":"a"}` });
      assert.equal((await post(token)).statusCode, 200);
      clock.advance(60_000);
      const refused = await post(token);
      assertErrorRecord(refused, 401, 'the token has expired');
      assert.equal(refused.headers['www-authenticate'], EXPIRED_CHALLENGE);
      assert.equal((await post(local.token)).statusCode, 200, 'a token without expiry is unaffected by the clock');
    });

    it('records the last use of a token refused for its scope, but not of an expired one', async (context) => {
      const clock = new FakeClock(Date.parse('2031-01-01T00:00:00.000Z'));
      const local = await buildTestApp(context, t.databaseUrl, {}, { wallClock: clock.now });
      const reader = generateToken();
      const expired = generateToken();
      const readerName = `reader-${randomUUID()}`;
      const expiredName = `expired-${randomUUID()}`;
      await local.store.tokens.add(newToken(readerName, hashToken(reader), { scopes: ['plants:read'] }));
      await local.store.tokens.add(newToken(expiredName, hashToken(expired), { expiresAt: new Date(clock.now() - 1) }));
      const post = (bearer: string) =>
        local.app.inject({ method: 'POST', url: '/plants', headers: { ...local.headers, authorization: `Bearer ${bearer}` }, payload: '{"id":1,"name":"a"}' });
      assert.equal((await post(reader)).statusCode, 403);
      assert.equal((await post(expired)).statusCode, 401);
      await local.services.tokens.refresh();
      const lastUse = async (name: string) => (await local.store.tokens.list()).find((info) => info.name === name)?.lastUsedAt;
      assert.deepEqual(await lastUse(readerName), new Date(clock.now()));
      assert.equal(await lastUse(expiredName), null);
    });
  });
}

describe('token scopes and expiry across two replicas on one PostgreSQL', () => {
  const clock = new FakeClock(Date.now());
  const first = useTestApp(postgresDatabase, { TOKEN_CACHE_MS: '60000' }, { wallClock: clock.now });

  it('a token made after both started has its scopes on both, and expires on both at its expiry', async (context) => {
    const second = await buildTestApp(context, first.databaseUrl, { TOKEN_CACHE_MS: '60000' }, { wallClock: clock.now });
    const replicas = [first, second];
    const token = generateToken();
    // Made through the first replica's store, as the CLI anywhere would: the second learns of it from the database.
    await first.store.tokens.add(newToken(`shared-${randomUUID()}`, hashToken(token), { scopes: ['plants:read', 'plants:delete'], expiresAt: new Date(clock.now() + 3_600_000) }));
    assert.equal((await first.app.inject({ method: 'POST', url: '/plants', headers: first.headers, payload: '{"id":77,"name":"shared"}' })).statusCode, 200);
    for (const replica of replicas) {
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      assert.equal((await replica.app.inject({ method: 'GET', url: '/plants/77', headers })).statusCode, 200);
      const refused = await replica.app.inject({ method: 'POST', url: '/plants', headers, payload: '{"id":78,"name":"x"}' });
      assertErrorRecord(refused, 403, lacking('plants:create'));
      assert.equal(refused.headers['www-authenticate'], insufficient('plants:create'));
    }
    clock.advance(3_600_000);
    for (const replica of replicas) {
      const response = await replica.app.inject({ method: 'DELETE', url: '/plants/77', headers: { authorization: `Bearer ${token}` } });
      assertErrorRecord(response, 401, 'the token has expired');
      assert.equal(response.headers['www-authenticate'], EXPIRED_CHALLENGE);
    }
    assert.deepEqual(await second.store.plants.get(77n), { id: 77n, name: 'shared', tag: null });
  });
});
