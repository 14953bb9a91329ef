import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { useTestApp } from '../helpers/app.js';
import { assertErrorRecord, idsOf } from '../helpers/assertions.js';
import { DATABASES } from '../helpers/databases.js';
import { deleteAllPlants, INT64_MAX, INT64_MIN, PAST_DOUBLE, plantJson, storedIds } from '../helpers/plants.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

/** `after` and the rest of a Link rel="next" header, or undefined when there is none. */
function nextLink(response: LightMyRequestResponse): string | undefined {
  const link = response.headers.link;
  if (link === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(String(link));
  assert.ok(match, `Link header ${String(link)} is one RFC 8288 link with rel="next"`);
  return match[1];
}

for (const database of DATABASES) {
  describe(`reads and deletes on ${database.kind}`, () => {
    const t = useTestApp(database.create);

    const post = (id: string, name: string, tag?: string) =>
      t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: plantJson(id, name, tag) });
    const get = (url: string, headers: Record<string, string> = { authorization: t.headers.authorization as string }) =>
      t.app.inject({ method: 'GET', url, headers });
    const del = (url: string, headers: Record<string, string> = { authorization: t.headers.authorization as string }) =>
      t.app.inject({ method: 'DELETE', url, headers });

    beforeEach(() => deleteAllPlants(t));

    describe('GET /plants/{id}', () => {
      for (const id of [INT64_MAX, INT64_MIN, PAST_DOUBLE, '-9007199254740993', '0', '1']) {
        it(`answers plant ${id} with its exact id in the path and the body`, async () => {
          assert.equal((await post(id, `plant ${id}`, 'exact')).statusCode, 200);
          const response = await get(`/plants/${id}`);
          assert.equal(response.statusCode, 200, response.body);
          assert.match(String(response.headers['content-type']), /^application\/json/);
          assert.equal(response.body, plantJson(id, `plant ${id}`, 'exact'));
        });
      }

      it('omits tag when the plant has none, and keeps an empty tag', async () => {
        await post('7', 'Fern');
        await post('8', 'Cactus', '');
        assert.equal((await get('/plants/7')).body, '{"id":7,"name":"Fern"}');
        assert.equal((await get('/plants/8')).body, '{"id":8,"name":"Cactus","tag":""}');
      });

      it('answers 404 for an absent id, including one that differs from a stored id only past 2^53', async () => {
        await post(PAST_DOUBLE, 'exact');
        assertErrorRecord(await get('/plants/9007199254740992'), 404, /no plant with id 9007199254740992/);
        assertErrorRecord(await get('/plants/42'), 404);
      });

      const invalid = ['abc', '1.5', '1e3', '+5', '05', '-0', ' 5', '0x10', '9223372036854775808', '-9223372036854775809', '1'.repeat(40)];
      for (const id of invalid) {
        it(`answers 400 naming the parameter for id ${JSON.stringify(id)}`, async () => {
          assertErrorRecord(await get(`/plants/${encodeURIComponent(id)}`), 400, /^params\.id must be an integer from -9223372036854775808 to 9223372036854775807/);
        });
      }

      it('does not change the create contract: POST still answers the Plant without id', async () => {
        const response = await post(INT64_MAX, 'Monstera', 'aroid');
        assert.equal(response.statusCode, 200);
        assert.equal(response.body, '{"name":"Monstera","tag":"aroid"}');
      });
    });

    describe('DELETE /plants/{id}', () => {
      it('answers 204 with no body, after which the plant is gone and the id can be created again', async () => {
        await post(INT64_MIN, 'first', 'a');
        const response = await del(`/plants/${INT64_MIN}`);
        assert.equal(response.statusCode, 204);
        assert.equal(response.body, '');
        assert.equal(response.headers['content-type'], undefined);
        assertErrorRecord(await get(`/plants/${INT64_MIN}`), 404);
        assert.equal(await t.store.plants.get(BigInt(INT64_MIN)), undefined);
        // Different content than before: not a conflict, since the first plant is gone.
        assert.equal((await post(INT64_MIN, 'second')).statusCode, 200);
        assert.equal((await get(`/plants/${INT64_MIN}`)).body, plantJson(INT64_MIN, 'second'));
      });

      it('accepts a DELETE that carries Content-Type: application/json and no body, as many clients send', async () => {
        await post('77', 'sent with a content type');
        const response = await del('/plants/77', { authorization: t.headers.authorization as string, 'content-type': 'application/json' });
        assert.equal(response.statusCode, 204, response.body);
        assert.equal(await t.store.plants.get(77n), undefined);
        // A create still needs its body.
        assertErrorRecord(await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers }), 400, /request body is required/);
      });

      it('deletes only the exact id', async () => {
        await post(PAST_DOUBLE, 'odd');
        await post('9007199254740992', 'even');
        assert.equal((await del(`/plants/${PAST_DOUBLE}`)).statusCode, 204);
        assert.deepEqual(await storedIds(t), [9007199254740992n]);
      });

      it('answers 404 for an absent id, and for a second delete', async () => {
        assertErrorRecord(await del('/plants/12345'), 404, /no plant with id 12345/);
        await post('5', 'once');
        assert.equal((await del('/plants/5')).statusCode, 204);
        assertErrorRecord(await del('/plants/5'), 404);
      });

      it('answers 400 for an invalid id', async () => {
        assertErrorRecord(await del('/plants/1.0'), 400, /^params\.id must be an integer/);
        assertErrorRecord(await del('/plants/9223372036854775808'), 400, /^params\.id/);
      });
    });

    describe('GET /plants', () => {
      async function seed(count: number, tagOf: (i: number) => string | undefined = () => undefined): Promise<void> {
        for (let i = 0; i < count; i++) assert.equal((await post(String(i + 1), `plant ${i + 1}`, tagOf(i + 1))).statusCode, 200);
      }

      it('answers a JSON array ordered by id with exact ids, and no Link on the last page', async () => {
        for (const id of [INT64_MAX, '5', INT64_MIN, PAST_DOUBLE, '-1']) await post(id, `p${id}`, id === '5' ? 't' : undefined);
        const response = await get('/plants');
        assert.equal(response.statusCode, 200, response.body);
        assert.match(String(response.headers['content-type']), /^application\/json/);
        assert.equal(
          response.body,
          `[${[plantJson(INT64_MIN, `p${INT64_MIN}`), plantJson('-1', 'p-1'), plantJson('5', 'p5', 't'), plantJson(PAST_DOUBLE, `p${PAST_DOUBLE}`), plantJson(INT64_MAX, `p${INT64_MAX}`)].join(',')}]`,
        );
        assert.equal(response.headers.link, undefined);
      });

      it('answers an empty array when nothing is stored', async () => {
        const response = await get('/plants');
        assert.equal(response.statusCode, 200);
        assert.equal(response.body, '[]');
        assert.equal(response.headers.link, undefined);
      });

      it('answers 20 plants by default, with a Link to the next page', async () => {
        await seed(25);
        const response = await get('/plants');
        assert.deepEqual(idsOf(response.body), Array.from({ length: 20 }, (_, i) => BigInt(i + 1)));
        assert.equal(nextLink(response), '/plants?limit=20&after=20');
        const last = await get('/plants?limit=20&after=20');
        assert.deepEqual(idsOf(last.body), [21n, 22n, 23n, 24n, 25n]);
        assert.equal(last.headers.link, undefined);
      });

      it('has no Link when the page ends exactly at the last plant', async () => {
        await seed(4);
        const response = await get('/plants?limit=4');
        assert.equal(idsOf(response.body).length, 4);
        assert.equal(response.headers.link, undefined);
      });

      it('accepts limit 1000 and answers at most 1000 plants', async () => {
        const ids = Array.from({ length: 1001 }, (_, i) => BigInt(i + 1));
        await t.store.plants.create(ids.map((id) => ({ id, name: `bulk ${id}`, tag: null })));
        const response = await get('/plants?limit=1000');
        assert.equal(response.statusCode, 200);
        assert.deepEqual(idsOf(response.body), ids.slice(0, 1000));
        assert.equal(nextLink(response), '/plants?limit=1000&after=1000');
      });

      const badLimits = ['0', '-1', '1001', '1000000000000', 'ten', '1.5', '05', '', '+3'];
      for (const limit of badLimits) {
        it(`answers 400 naming limit for limit=${JSON.stringify(limit)}`, async () => {
          assertErrorRecord(await get(`/plants?limit=${encodeURIComponent(limit)}`), 400, /^querystring\.limit must be an integer from 1 to 1000/);
        });
      }

      it('answers 400 naming after for an invalid cursor', async () => {
        assertErrorRecord(await get('/plants?after=x'), 400, /^querystring\.after must be an integer from -9223372036854775808/);
        assertErrorRecord(await get('/plants?after=9223372036854775808'), 400, /^querystring\.after/);
      });

      it('answers 400 for an unknown query parameter, naming it', async () => {
        assertErrorRecord(await get('/plants?offset=10'), 400, /unknown property 'offset'/);
        assertErrorRecord(await get('/plants?limit=5&color=red'), 400, /unknown property 'color'/);
      });

      it('answers 400 for a repeated parameter', async () => {
        assertErrorRecord(await get('/plants?limit=1&limit=2'), 400, /querystring\.limit/);
      });

      it('answers plants strictly after the cursor, which need not be a stored id', async () => {
        await seed(6);
        assert.deepEqual(idsOf((await get('/plants?after=3')).body), [4n, 5n, 6n]);
        assert.deepEqual(idsOf((await get('/plants?after=-100&limit=2')).body), [1n, 2n]);
        assert.equal((await get(`/plants?after=${INT64_MAX}`)).body, '[]');
        await post(INT64_MAX, 'top');
        assert.deepEqual(idsOf((await get(`/plants?after=${INT64_MIN}`)).body), [1n, 2n, 3n, 4n, 5n, 6n, BigInt(INT64_MAX)]);
      });

      it('filters by exact tag, case and all, and keeps the tag in the Link', async () => {
        await seed(10, (i) => (i % 2 === 0 ? 'even' : i === 3 ? 'Even' : 'odd'));
        const first = await get('/plants?tag=even&limit=3');
        assert.deepEqual(idsOf(first.body), [2n, 4n, 6n]);
        assert.equal(nextLink(first), '/plants?limit=3&after=6&tag=even');
        const second = await get(nextLink(first) as string);
        assert.deepEqual(idsOf(second.body), [8n, 10n]);
        assert.equal(second.headers.link, undefined);
        assert.deepEqual(idsOf((await get('/plants?tag=Even')).body), [3n]);
        assert.equal((await get('/plants?tag=eve')).body, '[]');
      });

      it('filters by the empty tag, which is not the absent tag', async () => {
        await post('1', 'none');
        await post('2', 'empty', '');
        assert.deepEqual(idsOf((await get('/plants?tag=')).body), [2n]);
      });

      it('percent-encodes the tag in the Link, and the Link leads back to the same tag', async () => {
        const tag = 'a b&c=d+é/?#%';
        await post('1', 'x', tag);
        await post('2', 'y', tag);
        await post('3', 'z', 'a b');
        const first = await get(`/plants?limit=1&tag=${encodeURIComponent(tag)}`);
        assert.deepEqual(idsOf(first.body), [1n]);
        const link = nextLink(first) as string;
        assert.match(link, /^[\x21-\x7e]+$/, 'the link is plain ASCII without spaces');
        const second = await get(link);
        assert.equal(second.body, `[${plantJson('2', 'y', tag)}]`);
        assert.equal(second.headers.link, undefined);
      });

      it('walks a listing that changes between pages: no plant present throughout is skipped or repeated', async () => {
        // Ids spread over the int64 range, past 2^53, so that exactness and order are both at stake.
        const initial: bigint[] = [];
        for (let i = 0n; i < 40n; i++) initial.push(BigInt(INT64_MIN) + i * 230584300921369395n + 7n);
        await t.store.plants.create(initial.map((id) => ({ id, name: `p${id}`, tag: id % 2n === 0n ? 'even' : null })));
        const present = new Set(initial);
        const everPresent = new Set(initial);
        const removed = new Set<bigint>();
        const seen: bigint[] = [];
        let url: string | undefined = '/plants?limit=7';
        let pages = 0;
        let nextNew = 1n;
        while (url !== undefined) {
          const response = await get(url);
          assert.equal(response.statusCode, 200, response.body);
          const ids = idsOf(response.body);
          assert.ok(ids.length <= 7);
          for (const id of ids) assert.ok(everPresent.has(id), `answered ${id}, which was never stored`);
          seen.push(...ids);
          url = nextLink(response);
          pages++;
          // Between pages: delete one plant not yet seen and one already seen, insert one ahead and one behind.
          const last = ids.at(-1) ?? 0n;
          const ahead = [...present].filter((id) => id > last && !removed.has(id));
          const behind = [...present].filter((id) => id <= last);
          const gone = [ahead[ahead.length >> 1], behind[0]].filter((id): id is bigint => id !== undefined);
          for (const id of gone) {
            assert.equal((await del(`/plants/${id}`)).statusCode, 204);
            present.delete(id);
            removed.add(id);
          }
          for (const id of [last + 1000n + nextNew, BigInt(INT64_MIN) + nextNew]) {
            assert.equal((await post(String(id), `new ${id}`)).statusCode, 200);
            present.add(id);
            everPresent.add(id);
            nextNew++;
          }
          assert.ok(pages < 100, 'the walk ends');
        }
        assert.ok(pages > 3, `walked ${pages} pages`);
        for (let i = 1; i < seen.length; i++) assert.ok((seen[i - 1] as bigint) < (seen[i] as bigint), 'ids strictly ascending across pages');
        const throughout = initial.filter((id) => !removed.has(id));
        const seenSet = new Set(seen);
        for (const id of throughout) assert.ok(seenSet.has(id), `plant ${id}, present throughout, was not skipped`);
        assert.equal(seenSet.size, seen.length, 'no plant repeated');
      });
    });

    describe('authentication on the new routes', () => {
      const routes: Array<[string, string]> = [
        ['GET', '/plants'],
        ['GET', '/plants/1'],
        ['DELETE', '/plants/1'],
      ];
      for (const [method, url] of routes) {
        it(`${method} ${url} needs a valid bearer token`, async () => {
          await post('1', 'guarded');
          const none = await t.app.inject({ method: method as 'GET', url });
          assertErrorRecord(none, 401);
          assert.equal(none.headers['www-authenticate'], 'Bearer realm="plantstore"');
          const wrong = await t.app.inject({ method: method as 'GET', url, headers: { authorization: 'Bearer not-a-token' } });
          assertErrorRecord(wrong, 401);
          assert.match(String(wrong.headers['www-authenticate']), /error="invalid_token"/);
          // Authentication comes before validation: an invalid query still answers 401 to a stranger.
          assertErrorRecord(await t.app.inject({ method: method as 'GET', url: `${url}?bogus=1` }), 401);
          assert.ok(await t.store.plants.get(1n), 'nothing was deleted');
        });
      }
    });

    describe('other methods and the document', () => {
      it('answers 405 with Allow on /plants/{id}', async () => {
        const response = await t.app.inject({ method: 'PUT', url: '/plants/1', headers: t.headers, payload: '{}' });
        assertErrorRecord(response, 405);
        assert.equal(response.headers.allow, 'GET, HEAD, DELETE');
        assert.match(String((await t.app.inject({ method: 'PUT', url: '/plants', headers: t.headers, payload: '{}' })).headers.allow), /POST, GET/);
      });

      it('documents the new operations, their parameters and responses', async () => {
        const document = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
          paths: Record<string, Record<string, { operationId: string; parameters?: Array<{ name: string; in: string; required: boolean }>; responses: Record<string, unknown> }>>;
          components: { schemas: Record<string, { properties: Record<string, { type: string; format?: string }> }> };
        };
        const list = document.paths['/plants']?.get;
        assert.equal(list?.operationId, 'listPlants');
        assert.deepEqual(list?.parameters?.map((p) => [p.name, p.in, p.required]), [['limit', 'query', false], ['after', 'query', false], ['tag', 'query', false]]);
        // 408 and 431 can answer any operation, 414 one with a path parameter: Node and the router answer them first.
        assert.deepEqual(Object.keys(list?.responses ?? {}).sort(), ['200', '400', '401', '403', '408', '429', '431', '503']);
        const one = document.paths['/plants/{id}'];
        assert.equal(one?.get?.operationId, 'getPlant');
        assert.equal(one?.delete?.operationId, 'deletePlant');
        assert.deepEqual(one?.get?.parameters?.map((p) => [p.name, p.in, p.required]), [['id', 'path', true]]);
        assert.deepEqual(Object.keys(one?.delete?.responses ?? {}).sort(), ['204', '400', '401', '403', '404', '408', '414', '429', '431', '503']);
        const { headers: _headers, ...readAnswer } = (one?.get?.responses['200'] ?? {}) as Record<string, unknown>;
        assert.deepEqual(readAnswer, { description: 'Success', content: { 'application/json': { schema: { $ref: '#/components/schemas/StoredPlant' } } } });
        assert.deepEqual(document.components.schemas.StoredPlant?.properties.id, { type: 'integer', format: 'int64', description: 'Identification number of the plant, exact over the whole int64 range' });
      });
    });
  });
}
