/**
 * The API's contract (docs/api.md#the-contract), rule by rule, in-process on SQLite and PostgreSQL: mostly what
 * POST /plants answers, and that every error from any layer is an Error record; then health and readiness. Rule 8
 * (200 means durable) is held by test/storage/durability.test.ts and test/process/crash.test.ts.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { createLogger } from '../../src/observability/log.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { READY_REUSE_MS } from '../../src/health/readiness.js';
import { buildTestApp, useTestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { DATABASES } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

const INT64_MAX = '9223372036854775807';
const INT64_MIN = '-9223372036854775808';

for (const database of DATABASES) {
  describe(`HTTP contract on ${database.kind}`, () => {
    const t = useTestApp(database.create);
    let nextId = 1000;
    const freshId = () => String(nextId++);
    const post = (payload: string | Buffer, headers: Record<string, string> = t.headers) =>
      t.app.inject({ method: 'POST', url: '/plants', headers, payload });

    describe('rule 1: a valid create answers exactly the Plant', () => {
      it('answers 200 with name and tag, never id', async () => {
        const response = await post(`{"id":${freshId()},"name":"Monstera","tag":"aroid"}`);
        assert.equal(response.statusCode, 200);
        assert.match(String(response.headers['content-type']), /^application\/json/);
        assert.deepEqual(response.json(), { name: 'Monstera', tag: 'aroid' });
      });

      it('omits tag when none was given', async () => {
        const response = await post(`{"id":${freshId()},"name":"Fern"}`);
        assert.equal(response.statusCode, 200);
        assert.equal(response.body, '{"name":"Fern"}');
      });

      it('stores what it answered', async () => {
        const id = freshId();
        await post(`{"id":${id},"name":"Pothos","tag":"vine"}`);
        assert.deepEqual(await t.store.plants.get(BigInt(id)), { id: BigInt(id), name: 'Pothos', tag: 'vine' });
      });

      it('keeps an empty tag as an empty tag', async () => {
        const id = freshId();
        const response = await post(`{"id":${id},"name":"Cactus","tag":""}`);
        assert.deepEqual(response.json(), { name: 'Cactus', tag: '' });
        assert.equal((await t.store.plants.get(BigInt(id)))?.tag, '');
      });
    });

    describe('rule 3: NewPlant is closed and nothing is coerced', () => {
      const cases: Array<[string, string, RegExp]> = [
        ['an unknown field', '{"id":1,"name":"a","color":"red"}', /unknown property 'color'/],
        ['a string id', '{"id":"5","name":"a"}', /body\.id must be an integer/],
        ['a boolean id', '{"id":true,"name":"a"}', /body\.id must be an integer/],
        ['a null tag', '{"id":1,"name":"a","tag":null}', /body\.tag must be of type string/],
        ['a numeric name', '{"id":1,"name":5}', /body\.name must be of type string/],
        ['a missing id', '{"name":"a"}', /missing required property 'id'/],
        ['a missing name', '{"id":1}', /missing required property 'name'/],
        ['an empty name', '{"id":1,"name":""}', /body\.name must not be empty/],
        ['a JSON array', '[{"id":1,"name":"a"}]', /body must be of type object/],
        ['a JSON scalar', '42', /body must be of type object/],
        ['invalid JSON', '{"id":1,', /not valid JSON/],
        ['a duplicate key', '{"id":1,"name":"a","name":"b"}', /[Dd]uplicate key/],
      ];
      for (const [what, payload, message] of cases) {
        it(`refuses ${what} with 400 naming the problem`, async () => {
          assertErrorRecord(await post(payload), 400, message);
        });
      }

      it('stores nothing for a refused body', async () => {
        const id = freshId();
        assertErrorRecord(await post(`{"id":${id},"name":"a","extra":1}`), 400);
        assert.equal(await t.store.plants.get(BigInt(id)), undefined);
      });

      it('enforces the configured name and tag lengths', async () => {
        const { nameLength, tagLength } = t.config.limits;
        assert.equal((await post(`{"id":${freshId()},"name":"${'n'.repeat(nameLength)}"}`)).statusCode, 200);
        assertErrorRecord(await post(`{"id":${freshId()},"name":"${'n'.repeat(nameLength + 1)}"}`), 400, /body\.name must be at most/);
        assertErrorRecord(await post(`{"id":${freshId()},"name":"a","tag":"${'t'.repeat(tagLength + 1)}"}`), 400, /body\.tag must be at most/);
      });

      it('takes the length limits from NAME_MAX_LENGTH and TAG_MAX_LENGTH', async (context) => {
        const strict = await buildTestApp(context, t.databaseUrl, { NAME_MAX_LENGTH: '5', TAG_MAX_LENGTH: '3' });
        const create = (body: object) =>
          strict.app.inject({ method: 'POST', url: '/plants', headers: strict.headers, payload: JSON.stringify({ id: Number(freshId()), ...body }) });
        assert.equal((await create({ name: 'Ficus', tag: 'fig' })).statusCode, 200);
        assertErrorRecord(await create({ name: 'Ficus!' }), 400, /^body\.name must be at most 5 characters long$/);
        assertErrorRecord(await create({ name: 'Ficus', tag: 'figs' }), 400, /^body\.tag must be at most 3 characters long$/);
      });

      it('refuses a body over the limit with 413', async () => {
        const name = 'x'.repeat(t.config.limits.bodyBytes);
        assertErrorRecord(await post(`{"id":${freshId()},"name":"${name}"}`), 413, /larger than the limit of 16384 bytes/);
      });
    });

    describe('rule 4: ids are int64, exact end to end', () => {
      for (const id of [INT64_MAX, INT64_MIN, '9007199254740993', '-9007199254740993', '0', '1']) {
        it(`keeps ${id} exact`, async () => {
          const response = await post(`{"id":${id},"name":"exact ${id}"}`);
          assert.equal(response.statusCode, 200, response.body);
          assert.deepEqual(await t.store.plants.get(BigInt(id)), { id: BigInt(id), name: `exact ${id}`, tag: null });
        });
      }

      it('tells 9007199254740993 from its rounded neighbour 9007199254740992', async () => {
        assert.equal((await post('{"id":9007199254740992,"name":"even"}')).statusCode, 200);
        // A parser that rounds would see the same id twice and answer 409.
        assert.equal((await post('{"id":9007199254740995,"name":"odd"}')).statusCode, 200);
        assert.equal((await t.store.plants.get(9007199254740995n))?.name, 'odd');
        assert.equal((await t.store.plants.get(9007199254740992n))?.name, 'even');
      });

      it('accepts integral spellings JSON Schema calls integers: 12.0 and 1.2e1', async () => {
        assert.equal((await post('{"id":1.2e3,"name":"spelled"}')).statusCode, 200);
        assert.equal((await t.store.plants.get(1200n))?.name, 'spelled');
      });

      const refused: Array<[string, RegExp]> = [
        ['9223372036854775808', /int64/],
        ['-9223372036854775809', /int64/],
        ['1e400', /int64/],
        ['1'.repeat(500), /int64/],
        ['1.5', /must be an integer/],
        ['9007199254740993.5', /must be an integer/],
        ['1.0000000000000000001', /must be an integer/],
        ['"9"', /must be an integer/],
      ];
      for (const [id, message] of refused) {
        it(`refuses id ${id.length > 30 ? `${id.slice(0, 20)}…` : id} with 400`, async () => {
          assertErrorRecord(await post(`{"id":${id},"name":"a"}`), 400, message);
        });
      }
    });

    describe('rule 5: the body must be JSON', () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', 'application/json; charset=latin1']) {
        it(`refuses Content-Type ${type} with 415`, async () => {
          assertErrorRecord(await post(`{"id":${freshId()},"name":"a"}`, { ...t.headers, 'content-type': type }), 415);
        });
      }

      it('refuses a missing Content-Type with 415', async () => {
        const { 'content-type': _, ...headers } = t.headers;
        assertErrorRecord(await post(`{"id":${freshId()},"name":"a"}`, headers), 415);
      });

      for (const type of ['application/json; charset=utf-8', 'Application/JSON', 'application/json;charset="UTF-8"']) {
        it(`accepts Content-Type ${type}`, async () => {
          assert.equal((await post(`{"id":${freshId()},"name":"a"}`, { ...t.headers, 'content-type': type })).statusCode, 200);
        });
      }

      it('refuses an empty body with 400', async () => {
        assertErrorRecord(await post(''), 400, /body/);
      });

      it('refuses a content-coded body with 415 naming the coding, instead of parsing its bytes as JSON', async () => {
        const id = freshId();
        const json = `{"id":${id},"name":"a"}`;
        for (const [coding, payload, named] of [
          ['gzip', gzipSync(json), 'gzip'],
          // The coding is refused even when the bytes happen to be plain JSON: they would be read as something else.
          ['gzip', json, 'gzip'],
          ['br', json, 'br'],
          ['identity, deflate', json, 'deflate'],
        ] as const) {
          const response = await post(payload, { ...t.headers, 'content-encoding': coding });
          assertErrorRecord(response, 415, new RegExp(`^Content-Encoding ${named} is not supported`));
          assert.equal(response.headers['accept-encoding'], 'identity');
        }
        assert.equal(await t.store.plants.get(BigInt(id)), undefined);
        // Authentication still comes first.
        assertErrorRecord(await post(json, { 'content-type': 'application/json', 'content-encoding': 'gzip' }), 401);
      });

      it('accepts Content-Encoding: identity', async () => {
        assert.equal((await post(`{"id":${freshId()},"name":"a"}`, { ...t.headers, 'content-encoding': 'identity' })).statusCode, 200);
      });
    });

    describe('rule 6: RFC 6750 bearer authentication, before the body', () => {
      const payload = () => `{"id":${freshId()},"name":"a"}`;
      const challenge = 'Bearer realm="plantstore"';

      it('answers 401 with a challenge when there are no credentials', async () => {
        const response = await post(payload(), { 'content-type': 'application/json' });
        assertErrorRecord(response, 401);
        assert.equal(response.headers['www-authenticate'], challenge);
      });

      it('answers 401 with a challenge for another scheme', async () => {
        const response = await post(payload(), { 'content-type': 'application/json', authorization: `Basic ${btoa('u:p')}` });
        assertErrorRecord(response, 401);
        assert.equal(response.headers['www-authenticate'], challenge);
        assert.doesNotMatch(response.body, /dTpw/);
      });

      it('answers 401 invalid_token for an unknown token', async () => {
        const response = await post(payload(), { 'content-type': 'application/json', authorization: 'Bearer plst_unknown' });
        assertErrorRecord(response, 401, /invalid or revoked/);
        assert.equal(response.headers['www-authenticate'], `${challenge}, error="invalid_token"`);
      });

      it('answers 401 invalid_token for a revoked token, within the cache period', async (context) => {
        const local = await buildTestApp(context, t.databaseUrl, { TOKEN_CACHE_MS: '100' });
        const headers = local.headers;
        assert.equal((await local.app.inject({ method: 'POST', url: '/plants', headers, payload: payload() })).statusCode, 200);
        assert.equal(await local.store.tokens.revoke(local.tokenName), true);
        await new Promise((resolve) => setTimeout(resolve, 400));
        const response = await local.app.inject({ method: 'POST', url: '/plants', headers, payload: payload() });
        assertErrorRecord(response, 401);
        assert.equal(response.headers['www-authenticate'], `${challenge}, error="invalid_token"`);
      });

      it('accepts the scheme name in any case', async () => {
        for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
          const response = await post(payload(), { ...t.headers, authorization: `${scheme} ${t.token}` });
          assert.equal(response.statusCode, 200, `${scheme}: ${response.body}`);
        }
      });

      it('answers 401 with a bare challenge, no error code, for Bearer without a token (RFC 6750 §3.1)', async () => {
        for (const authorization of ['Bearer', 'Bearer ', 'bearer   ', '']) {
          const response = await post(payload(), { 'content-type': 'application/json', authorization });
          assertErrorRecord(response, 401, /^authentication required/);
          assert.equal(response.headers['www-authenticate'], challenge, JSON.stringify(authorization));
        }
      });

      it('answers 400 invalid_request for a malformed Bearer header', async () => {
        for (const authorization of ['Bearer a b', 'Bearer ä', 'Bearer ,', 'Bearer,x', `Bearer\t${t.token}`, `Bearer \t${t.token}`]) {
          const response = await post(payload(), { 'content-type': 'application/json', authorization });
          assertErrorRecord(response, 400, /malformed Authorization/);
          assert.equal(response.headers['www-authenticate'], `${challenge}, error="invalid_request"`, JSON.stringify(authorization));
        }
      });

      it('accepts more than one space between scheme and token (RFC 7235: 1*SP)', async () => {
        assert.equal((await post(payload(), { ...t.headers, authorization: `Bearer   ${t.token}` })).statusCode, 200);
      });

      it('authenticates before looking at the body', async () => {
        const noToken = { 'content-type': 'text/plain' };
        assertErrorRecord(await post('not json at all', noToken), 401);
        assertErrorRecord(await post('{"id":"x"}', { 'content-type': 'application/json' }), 401);
        assertErrorRecord(await post('x'.repeat(100_000), { 'content-type': 'application/json' }), 401);
      });
    });

    describe('rule 7: ids are unique; identical replays succeed', () => {
      it('answers a replay with the same name and tag with 200 and the stored Plant', async () => {
        const id = freshId();
        const body = `{"id":${id},"name":"Aloe","tag":"succulent"}`;
        assert.equal((await post(body)).statusCode, 200);
        const replay = await post(body);
        assert.equal(replay.statusCode, 200);
        assert.deepEqual(replay.json(), { name: 'Aloe', tag: 'succulent' });
      });

      for (const [what, second] of [
        ['another name', '{"name":"Other","tag":"succulent"}'],
        ['another tag', '{"name":"Aloe","tag":"other"}'],
        ['no tag', '{"name":"Aloe"}'],
      ] as const) {
        it(`answers the same id with ${what} with 409, keeping the first`, async () => {
          const id = freshId();
          assert.equal((await post(`{"id":${id},"name":"Aloe","tag":"succulent"}`)).statusCode, 200);
          assertErrorRecord(await post(`{"id":${id},${second.slice(1)}`), 409, new RegExp(`id ${id} already exists`));
          assert.deepEqual(await t.store.plants.get(BigInt(id)), { id: BigInt(id), name: 'Aloe', tag: 'succulent' });
        });
      }

      it('lets exactly one of many concurrent different creates of one id win', async () => {
        const id = freshId();
        const responses = await Promise.all(
          Array.from({ length: 20 }, (_, index) => post(`{"id":${id},"name":"racer ${index}"}`)),
        );
        const winners = responses.filter((response) => response.statusCode === 200);
        assert.equal(winners.length, 1);
        for (const response of responses) if (response.statusCode !== 200) assertErrorRecord(response, 409);
        assert.deepEqual(await t.store.plants.get(BigInt(id)), { id: BigInt(id), ...(winners[0]?.json() as object), tag: null });
      });

      it('answers every one of many concurrent identical creates with 200', async () => {
        const id = freshId();
        const responses = await Promise.all(Array.from({ length: 20 }, () => post(`{"id":${id},"name":"same"}`)));
        assert.deepEqual(new Set(responses.map((response) => response.statusCode)), new Set([200]));
      });
    });

    describe('rule 2: every error, from any layer, is an Error record', () => {
      it('answers an unknown path with 404', async () => {
        assertErrorRecord(await t.app.inject({ method: 'GET', url: '/nowhere' }), 404, /no route for GET \/nowhere/);
      });

      it('answers a wrong method with 405 and Allow', async () => {
        const response = await t.app.inject({ method: 'PUT', url: '/plants', headers: t.headers, payload: '{}' });
        assertErrorRecord(response, 405);
        assert.match(String(response.headers.allow), /POST/);
      });

      it('names the path in a 405 as /openapi.json does, not in Fastify syntax', async () => {
        const response = await t.app.inject({ method: 'PUT', url: '/plants/7', headers: t.headers, payload: '{}' });
        assertErrorRecord(response, 405, /^method PUT is not allowed on \/plants\/\{id\}; allowed: GET, HEAD, DELETE$/);
      });

      // Decided by method and path alone, before the body is read and without a token: a body the route would refuse
      // (wrong type, malformed, over the limit) must not turn these into a 400, 413 or 415.
      const oversized = `{"id":1,"name":"${'x'.repeat(20_000)}"}`;
      for (const [what, headers, payload] of [
        ['text/plain', { 'content-type': 'text/plain' }, 'hello'],
        ['malformed JSON', { 'content-type': 'application/json' }, '{x'],
        ['a body over the limit', { 'content-type': 'application/json' }, oversized],
      ] as const) {
        it(`answers a wrong method with ${what} and no token with 405, before reading the body`, async () => {
          for (const [method, url, allow] of [
            ['PUT', '/plants', 'POST, GET, HEAD'],
            ['PATCH', '/plants/1', 'GET, HEAD, DELETE'],
            ['POST', '/healthz', 'GET, HEAD'],
          ] as const) {
            const response = await t.app.inject({ method, url, headers, payload });
            assertErrorRecord(response, 405, new RegExp(`^method ${method} is not allowed on `));
            assert.equal(response.headers.allow, allow);
          }
        });

        it(`answers an unknown path with ${what} and no token with 404, before reading the body`, async () => {
          const response = await t.app.inject({ method: 'POST', url: '/nope?x=1', headers, payload });
          assertErrorRecord(response, 404, /^no route for POST \/nope$/);
        });
      }

      for (const [method, url] of [
        ['GET', '/plants/%ZZ'],
        ['DELETE', '/plants/%E0%A4%A'],
        ['GET', '/nowhere%ZZ'],
        ['POST', '/plants%ZZ'],
      ] as const) {
        it(`answers a path that is not valid percent-encoded UTF-8 (${method} ${url}) with 400`, async () => {
          const response = await t.app.inject({ method, url, headers: t.headers, payload: method === 'POST' ? '{"id":1,"name":"a"}' : undefined });
          assertErrorRecord(response, 400, /^the request path is not valid percent-encoded UTF-8$/);
        });
      }

      describe('a query string that is not valid percent-encoded UTF-8', () => {
        const get = (url: string, headers: Record<string, string> = t.headers) => t.app.inject({ method: 'GET', url, headers });
        const literalTag = `%FF-${freshId()}`;
        before(async () => {
          assert.equal((await post(`{"id":${freshId()},"name":"literal","tag":"${literalTag}"}`)).statusCode, 200);
        });

        for (const value of ['%FF', '%', '%Z', '%ZZ', '%E0%A4%A', '%ED%A0%80', `${literalTag.replace('%', '%25')}%`]) {
          it(`answers tag=${value} with 400 naming the parameter`, async () => {
            assertErrorRecord(await get(`/plants?tag=${value}`), 400, /^querystring\.tag is not valid percent-encoded UTF-8$/);
          });
        }

        it('no longer reads a malformed escape as literal text: tag=%FF… is refused, tag=%25FF… finds the plant', async () => {
          assertErrorRecord(await get(`/plants?tag=${literalTag}`), 400, /^querystring\.tag /);
          const found = await get(`/plants?tag=${encodeURIComponent(literalTag)}`);
          assert.equal(found.statusCode, 200, found.body);
          assert.deepEqual((found.json() as Array<{ tag: string }>).map((plant) => plant.tag), [literalTag]);
        });

        it('answers a malformed parameter name with 400', async () => {
          assertErrorRecord(await get('/plants?%FF=1'), 400, /^a query parameter name is not valid percent-encoded UTF-8$/);
        });

        it('decodes valid escapes and + as a space, and keeps repeated and unknown parameters 400', async () => {
          const tag = `a b/é-${freshId()}`;
          assert.equal((await post(`{"id":${freshId()},"name":"spaced","tag":"${tag}"}`)).statusCode, 200);
          const found = await get(`/plants?tag=${encodeURIComponent(tag).replaceAll('%20', '+')}`);
          assert.deepEqual((found.json() as Array<{ tag: string }>).map((plant) => plant.tag), [tag]);
          assertErrorRecord(await get('/plants?limit=1&limit=2'), 400, /^querystring\.limit must be of type string$/);
          assertErrorRecord(await get('/plants?color=red'), 400, /unknown property 'color'/);
        });

        it('answers a stranger 401 first, and refuses the bad query on every route', async () => {
          assertErrorRecord(await get('/plants?tag=%FF', {}), 401);
          assertErrorRecord(await get('/plants/1?x=%FF'), 400, /^querystring\.x is not valid/);
          assertErrorRecord(await t.app.inject({ method: 'POST', url: '/plants?x=%', headers: t.headers, payload: '{"id":1,"name":"a"}' }), 400, /^querystring\.x /);
        });
      });

      it('answers an over-long path parameter with 414', async () => {
        const response = await t.app.inject({ method: 'GET', url: `/plants/${'9'.repeat(120)}`, headers: t.headers });
        assertErrorRecord(response, 414, /^a path parameter is too long$/);
      });

      it('answers an internal failure with 500 and no detail, and logs the detail with the request id', async (context) => {
        const lines: Array<Record<string, unknown>> = [];
        const log = createLogger({ logLevel: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
        const broken = await buildTestApp(context, t.databaseUrl, {}, { log });
        // The store failing in a way it never should: the client learns nothing of it.
        broken.store.plants.create = async () => {
          throw new Error('secret internal detail');
        };
        const response = await broken.app.inject({ method: 'POST', url: '/plants', headers: broken.headers, payload: '{"id":1,"name":"a"}' });
        assertErrorRecord(response, 500, /^internal server error$/);
        assert.doesNotMatch(response.body, /secret/);
        // The operator gets what the client does not, on a line that can be tied to the request.
        const logged = lines.filter((line) => line.msg === 'unhandled error');
        assert.equal(logged.length, 1, JSON.stringify(lines));
        assert.equal(logged[0]?.level, 50);
        assert.equal((logged[0]?.err as { message?: string } | undefined)?.message, 'secret internal detail');
        assert.equal(typeof logged[0]?.reqId, 'string');
        assert.ok((logged[0]?.reqId as string).length > 0);
      });
    });

    describe('health, readiness and the document', () => {
      it('answers /healthz and /readyz without a token', async () => {
        assert.deepEqual((await t.app.inject({ method: 'GET', url: '/healthz' })).json(), { status: 'ok' });
        assert.deepEqual((await t.app.inject({ method: 'GET', url: '/readyz' })).json(), { status: 'ready' });
      });

      it('answers /readyz 503 when the heartbeat write fails, and 200 once it succeeds', async (context) => {
        const probed = await buildTestApp(context, t.databaseUrl);
        const checkWritable = probed.store.checkWritable.bind(probed.store);
        probed.store.checkWritable = () => Promise.reject(new StorageUnavailableError('storage is unavailable; retry shortly'));
        const unready = await probed.app.inject({ method: 'GET', url: '/readyz' });
        assertErrorRecord(unready, 503, /^storage is unavailable; retry shortly$/);
        assert.equal(unready.headers['retry-after'], '1');
        probed.store.checkWritable = checkWritable;
        assert.equal((await probed.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
      });

      it('answers a flood of /readyz probes with one heartbeat write per interval', async (context) => {
        const probed = await buildTestApp(context, t.databaseUrl);
        let heartbeats = 0;
        const checkWritable = probed.store.checkWritable.bind(probed.store);
        probed.store.checkWritable = () => {
          heartbeats += 1;
          return checkWritable();
        };
        const started = performance.now();
        const probe = () => probed.app.inject({ method: 'GET', url: '/readyz' });
        const concurrent = await Promise.all(Array.from({ length: 20 }, probe));
        const sequential = [];
        for (let i = 0; i < 20; i += 1) sequential.push(await probe());
        const elapsed = performance.now() - started;
        for (const response of [...concurrent, ...sequential]) assert.equal(response.statusCode, 200, response.body);
        assert.ok(heartbeats <= 1 + Math.floor(elapsed / READY_REUSE_MS), `${heartbeats} heartbeats for 40 probes in ${elapsed} ms`);
        const counted = heartbeats;
        await new Promise((resolve) => setTimeout(resolve, READY_REUSE_MS));
        assert.equal((await probe()).statusCode, 200);
        assert.equal(heartbeats, counted + 1, 'a probe after the interval writes a heartbeat again');
      });

      it('answers /readyz 503 while storage refused the latest batch of creates, even if the heartbeat succeeds', async (context) => {
        const refusing = await buildTestApp(context, t.databaseUrl);
        const createPlants = refusing.store.plants.create.bind(refusing.store.plants);
        // A full disk can refuse a batch while a one-row heartbeat still fits in space already allocated.
        refusing.store.plants.create = () => Promise.reject(new StorageUnavailableError('storage is unavailable; retry shortly'));
        const refused = await refusing.app.inject({ method: 'POST', url: '/plants', headers: refusing.headers, payload: `{"id":${freshId()},"name":"a"}` });
        assertErrorRecord(refused, 503, /^storage is unavailable; retry shortly$/);
        assertErrorRecord(await refusing.app.inject({ method: 'GET', url: '/readyz' }), 503, /^storage is unavailable; retry shortly$/);
        // Once a batch commits, the service is ready again at once.
        refusing.store.plants.create = createPlants;
        const created = await refusing.app.inject({ method: 'POST', url: '/plants', headers: refusing.headers, payload: `{"id":${freshId()},"name":"a"}` });
        assert.equal(created.statusCode, 200, created.body);
        assert.equal((await refusing.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
      });
    });
  });
}
