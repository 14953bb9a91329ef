/**
 * Specific hostile inputs, each with its exact answer: never a 5xx, never a hang, never prototype pollution.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { before, describe, it } from 'node:test';
import { buildTestApp, useTestApp } from '../helpers/app.js';
import { assertErrorRecord, assertRawErrorRecord } from '../helpers/assertions.js';
import { sqliteDatabase } from '../helpers/databases.js';
import { parseResponse, rawRequest, type RawResponse } from '../helpers/process.js';

const INT64_RANGE = 'id must be an integer from -9223372036854775808 to 9223372036854775807 (int64)';

/** Sends `bytes` on one connection and parses every response the server writes until it closes the connection. */
async function allResponses(port: number, bytes: string): Promise<RawResponse[]> {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  let timedOut = false;
  socket.setTimeout(10_000, () => {
    timedOut = true;
    socket.destroy();
  });
  socket.write(bytes);
  await once(socket, 'close');
  assert.equal(timedOut, false, 'the server closes the connection');
  let data = Buffer.concat(chunks);
  const responses: RawResponse[] = [];
  for (;;) {
    const response = parseResponse(data);
    if (!response) break;
    responses.push({ ...response, elapsedMs: 0, closedWithoutAnswer: false });
    const headEnd = data.indexOf('\r\n\r\n') + 4;
    data = data.subarray(headEnd + Number(response.headers['content-length'] ?? 0));
  }
  assert.equal(data.length, 0, `bytes after the last complete response: ${JSON.stringify(data.toString('latin1'))}`);
  return responses;
}

describe('bad input', () => {
  // Room for 100k levels of nesting (200 KB); a short request timeout for the truncated-body case.
  const t = useTestApp(sqliteDatabase, { BODY_LIMIT_BYTES: String(1024 * 1024), REQUEST_TIMEOUT_MS: '1000' });
  let port: number;
  const post = (payload: string | Buffer) => t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload });
  const head = (extra: string) =>
    `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${t.token}\r\nContent-Type: application/json\r\n${extra}\r\n`;

  before(async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as { port: number }).port;
  });

  describe('deeply nested JSON', () => {
    const DEPTH = 100_000;
    it('100k nested arrays as the body → 400 body must be an object', async () => {
      assertErrorRecord(await post('['.repeat(DEPTH) + ']'.repeat(DEPTH)), 400, 'body must be of type object');
    });
    it('100k nested objects in tag → 400 naming the field', async () => {
      const body = `{"id":1,"name":"a","tag":${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}}`;
      assertErrorRecord(await post(body), 400, 'body.tag must be of type string');
    });
    it('100k nested arrays on the exact (int64) parser → 400 nested too deeply, not a stack overflow 500', async () => {
      // A 16-digit id sends the body through lossless-json, which recurses.
      const body = `{"id":1234567890123456,"name":"a","tag":${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}}`;
      assertErrorRecord(await post(body), 400, 'request body is nested too deeply');
    });
    it('is refused at the default body limit long before parsing', async (context) => {
      const small = await buildTestApp(context, t.databaseUrl);
      const response = await small.app.inject({ method: 'POST', url: '/plants', headers: small.headers, payload: '['.repeat(DEPTH) });
      assertErrorRecord(response, 413, 'request body is larger than the limit of 16384 bytes');
    });
  });

  describe('huge numbers', () => {
    it('1e400 → 400 out of the int64 range', async () => {
      assertErrorRecord(await post('{"id":1e400,"name":"a"}'), 400, INT64_RANGE);
      assertErrorRecord(await post('{"id":-1e400,"name":"a"}'), 400, INT64_RANGE);
    });
    it('1e-400 → 400 not an integer', async () => {
      assertErrorRecord(await post('{"id":1e-400,"name":"a"}'), 400, 'body.id must be an integer');
    });
    it('an exponent with 11 digits → 400 out of range, answered at once', async () => {
      assertErrorRecord(await post('{"id":1e99999999999,"name":"a"}'), 400, INT64_RANGE);
    });
    it('500-digit integers → 400 out of the int64 range', async () => {
      assertErrorRecord(await post(`{"id":${'9'.repeat(500)},"name":"a"}`), 400, INT64_RANGE);
      assertErrorRecord(await post(`{"id":-${'1'.repeat(500)},"name":"a"}`), 400, INT64_RANGE);
    });
    it('a 500-digit fraction → 400 not an integer', async () => {
      assertErrorRecord(await post(`{"id":1.${'1'.repeat(500)},"name":"a"}`), 400, 'body.id must be an integer');
    });
    it('the first integers outside int64 → 400; the ends of the range → 200', async () => {
      assertErrorRecord(await post('{"id":9223372036854775808,"name":"a"}'), 400, INT64_RANGE);
      assertErrorRecord(await post('{"id":-9223372036854775809,"name":"a"}'), 400, INT64_RANGE);
      assert.equal((await post('{"id":9223372036854775807,"name":"max"}')).statusCode, 200);
      assert.equal((await post('{"id":-9223372036854775808,"name":"min"}')).statusCode, 200);
    });
  });

  describe('__proto__ and constructor keys', () => {
    for (const [path, body] of [
      ['fast', '{"id":31,"name":"a","__proto__":{"polluted":true}}'],
      ['exact', '{"id":1234567890123431,"name":"a","__proto__":{"polluted":true,"tag":"x"}}'],
    ] as const) {
      it(`__proto__ on the ${path} parser → 400 unknown property, nothing stored, no pollution`, async () => {
        assertErrorRecord(await post(body), 400, "body has unknown property '__proto__'");
        assert.equal(({} as Record<string, unknown>).polluted, undefined);
        assert.equal(await t.store.plants.get(BigInt(JSON.parse(body.replace(/"__proto__":\{[^}]*\}/, '"x":0')).id as number)), undefined);
      });
    }
    it('constructor.prototype → 400 unknown property, no pollution', async () => {
      assertErrorRecord(await post('{"id":32,"name":"a","constructor":{"prototype":{"polluted":true}}}'), 400, "body has unknown property 'constructor'");
      assertErrorRecord(
        await post('{"id":1234567890123432,"name":"a","constructor":{"prototype":{"polluted":true}}}'),
        400,
        "body has unknown property 'constructor'",
      );
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });
    it('__proto__ nested in a field → 400 for that field', async () => {
      assertErrorRecord(await post('{"id":33,"name":"a","tag":{"__proto__":{"polluted":true}}}'), 400, 'body.tag must be of type string');
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });
  });

  describe('duplicate keys', () => {
    it('a repeated name → 400 naming the key', async () => {
      assertErrorRecord(await post('{"id":41,"name":"a","name":"b"}'), 400, /^request body is not valid JSON: Duplicate key 'name'/);
    });
    it('a repeated id → 400 naming the key', async () => {
      assertErrorRecord(await post('{"id":41,"id":42,"name":"a"}'), 400, /^request body is not valid JSON: Duplicate key 'id'/);
    });
    it('a key repeated through an escape (n\\u0061me) → 400', async () => {
      assertErrorRecord(await post('{"id":43,"name":"a","n\\u0061me":"b"}'), 400, /^request body is not valid JSON: Duplicate key 'name'/);
      assert.equal(await t.store.plants.get(43n), undefined);
    });

    it('refuses a key repeated with the same value too: the contract refuses duplicates, it does not guess they agree', async () => {
      assertErrorRecord(await post('{"id":44,"name":"a","name":"a"}'), 400, /^request body is not valid JSON: Duplicate key 'name'/);
      assertErrorRecord(await post('{"id":45,"id":45,"name":"a"}'), 400, /^request body is not valid JSON: Duplicate key 'id'/);
      assertErrorRecord(await post('{"id":46,"name":"a","n\\u0061me":"a"}'), 400, /^request body is not valid JSON: Duplicate key 'name'/);
      // Nothing was stored for any of them.
      for (const id of [44, 45, 46]) assertErrorRecord(await t.app.inject({ method: 'GET', url: `/plants/${id}`, headers: t.headers }), 404);
    });
  });

  describe('invalid UTF-8', () => {
    for (const [what, bytes] of [
      ['0xFF 0xFE', [0xff, 0xfe]],
      ['an overlong encoding of "/"', [0xc0, 0xaf]],
      ['a truncated sequence', [0xe2, 0x82]],
      ['an encoded surrogate', [0xed, 0xa0, 0x80]],
    ] as const) {
      it(`${what} in a string → 400`, async () => {
        const body = Buffer.concat([Buffer.from('{"id":51,"name":"a'), Buffer.from(bytes), Buffer.from('"}')]);
        assertErrorRecord(await post(body), 400, 'request body is not valid UTF-8');
      });
    }
    it('a charset other than UTF-8 → 415', async () => {
      const response = await t.app.inject({
        method: 'POST',
        url: '/plants',
        headers: { ...t.headers, 'content-type': 'application/json; charset=latin1' },
        payload: '{"id":52,"name":"a"}',
      });
      assertErrorRecord(response, 415, 'charset latin1 is not supported; send JSON as UTF-8');
    });
  });

  describe('lone surrogates', () => {
    for (const escape of ['\\ud800', '\\udfff', '\\ud83c', '\\udc00\\ud800']) {
      it(`"${escape}" in name → 400`, async () => {
        assertErrorRecord(await post(`{"id":61,"name":"a${escape}b"}`), 400, 'request body contains a lone UTF-16 surrogate escape, which is not valid Unicode');
      });
    }
    it('in tag, and in an unknown key → 400', async () => {
      assertErrorRecord(await post('{"id":62,"name":"a","tag":"\\ud800"}'), 400, /lone UTF-16 surrogate/);
      assertErrorRecord(await post('{"id":62,"name":"a","\\udfff":1}'), 400, /lone UTF-16 surrogate/);
    });
    it('a proper surrogate pair (🌱 as \\ud83c\\udf31) → 200, stored as the character', async () => {
      assert.equal((await post('{"id":63,"name":"\\ud83c\\udf31"}')).statusCode, 200);
      assert.equal((await t.store.plants.get(63n))?.name, '🌱');
    });
  });

  describe('NUL bytes', () => {
    it('an escaped NUL in name → 400', async () => {
      assertErrorRecord(await post('{"id":71,"name":"a\\u0000b"}'), 400, 'body.name must not contain NUL characters');
    });
    it('an escaped NUL in tag → 400', async () => {
      assertErrorRecord(await post('{"id":71,"name":"a","tag":"\\u0000"}'), 400, 'body.tag must not contain NUL characters');
    });
    it('a raw NUL byte in a string → 400 invalid JSON', async () => {
      const body = Buffer.concat([Buffer.from('{"id":71,"name":"a'), Buffer.from([0]), Buffer.from('"}')]);
      assertErrorRecord(await post(body), 400, /^request body is not valid JSON: Bad control character/);
      assert.equal(await t.store.plants.get(71n), undefined);
    });
  });

  describe('empty and non-object bodies', () => {
    it('an empty body → 400', async () => {
      assertErrorRecord(await post(''), 400, 'request body is required');
    });
    it('a body of whitespace → 400 invalid JSON', async () => {
      assertErrorRecord(await post('   '), 400, /^request body is not valid JSON/);
    });
    it('a JSON array → 400', async () => {
      assertErrorRecord(await post('[]'), 400, 'body must be of type object');
      assertErrorRecord(await post('[{"id":81,"name":"a"}]'), 400, 'body must be of type object');
    });
    for (const scalar of ['42', '"plant"', 'true', 'null', '-0', '1e400']) {
      it(`the scalar ${scalar} → 400`, async () => {
        assertErrorRecord(await post(scalar), 400, 'body must be of type object');
      });
    }
  });

  describe('framing over a raw socket', () => {
    it('a body longer than its Content-Length: the declared bytes are the body → 400 Error record and close, nothing stored', async () => {
      const body = '{"id":91,"name":"longer"}';
      const responses = await allResponses(port, head(`Content-Length: 10\r\n`) + body);
      // The declared 10 bytes are a truncated body, answered as invalid JSON; after a body it could not parse Fastify
      // closes the connection, so the rest is never read as a request of its own.
      assert.equal(responses.length, 1, JSON.stringify(responses));
      const [truncated] = responses as [RawResponse];
      assertRawErrorRecord(truncated, 400, /^request body is not valid JSON/);
      assert.equal(truncated.headers.connection, 'close');
      assert.equal(await t.store.plants.get(91n), undefined);
    });

    it('a valid create followed by garbage on the same connection → the 200 for the create, then a 400 Error record and close', async () => {
      const body = '{"id":92,"name":"exact"}';
      // The parser meets the garbage while the create is still being committed: its answer must not be lost or
      // overtaken, or a client would see a stored plant as failed.
      const responses = await allResponses(port, head(`Content-Length: ${body.length}\r\n`) + `${body}GARBAGE\r\n\r\n`);
      assert.equal(responses.length, 2, JSON.stringify(responses));
      const [created, refused] = responses as [RawResponse, RawResponse];
      assert.equal(created.status, 200, JSON.stringify(created));
      assert.deepEqual(JSON.parse(created.body), { name: 'exact' });
      assertRawErrorRecord(refused, 400, 'malformed HTTP request');
      assert.equal(refused.headers.connection, 'close');
      assert.deepEqual(await t.store.plants.get(92n), { id: 92n, name: 'exact', tag: null });
    });

    it('an answer sent before the body is read (401, 404, 405) closes the connection instead of reading a body of any size', async () => {
      const cases: Array<[string, number]> = [
        ['POST /plants HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n', 401],
        [`POST /nope HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${t.token}\r\nContent-Type: application/json\r\n`, 404],
        [`PUT /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${t.token}\r\nContent-Type: application/json\r\n`, 405],
      ];
      for (const [start, status] of cases) {
        // Declares far more than BODY_LIMIT_BYTES and sends a little of it: kept alive, the connection would take the
        // rest unbounded, and a body that stalls would earn a second answer (408) on it.
        const responses = await allResponses(port, `${start}Content-Length: 100000000\r\n\r\n${'x'.repeat(1024)}`);
        assert.deepEqual(responses.map((response) => response.status), [status], JSON.stringify(responses));
        assert.equal(responses[0]?.headers.connection, 'close');
      }
    });

    it('two pipelined creates and then garbage → both 200s in order, then the 400', async () => {
      const bodies = ['{"id":97,"name":"first"}', '{"id":98,"name":"second"}'];
      const requests = bodies.map((body) => head(`Content-Length: ${body.length}\r\n`) + body).join('');
      const responses = await allResponses(port, `${requests}GARBAGE\r\n\r\n`);
      assert.deepEqual(
        responses.map((response) => [response.status, response.body]),
        [
          [200, '{"name":"first"}'],
          [200, '{"name":"second"}'],
          [400, '{"error":400,"message":"malformed HTTP request"}'],
        ],
      );
    });

    it('a body shorter than its Content-Length → 408 once REQUEST_TIMEOUT_MS passes, nothing stored', async () => {
      const body = '{"id":93,"name":"short"}';
      const response = await rawRequest(port, { parts: [head(`Content-Length: ${body.length + 20}\r\n`), body], timeoutMs: 20_000 });
      assertRawErrorRecord(response, 408, 'request timed out');
      assert.equal(await t.store.plants.get(93n), undefined);
    });

    it('a chunked body → 200 and stored', async () => {
      const parts = ['{"id":94,', '"name":"chun', 'ked","tag":"te"}'];
      const chunks = parts.map((part) => `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`).join('');
      const response = await rawRequest(port, { parts: [head('Transfer-Encoding: chunked\r\n'), chunks, 50, '0\r\n\r\n'] });
      assert.equal(response.status, 200, JSON.stringify(response));
      assert.deepEqual(JSON.parse(response.body), { name: 'chunked', tag: 'te' });
      assert.deepEqual(await t.store.plants.get(94n), { id: 94n, name: 'chunked', tag: 'te' });
    });

    it('a chunked body with a bad chunk size → 400 malformed request', async () => {
      const response = await rawRequest(port, { parts: [head('Transfer-Encoding: chunked\r\n'), 'zz\r\n{"id":95}\r\n0\r\n\r\n'] });
      assertRawErrorRecord(response, 400, 'malformed HTTP request');
    });

    it('both Content-Length and chunked (a smuggling attempt) → 400 malformed request', async () => {
      const body = '{"id":96,"name":"smuggled"}';
      const response = await rawRequest(port, {
        parts: [head(`Content-Length: 4\r\nTransfer-Encoding: chunked\r\n`), `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`],
      });
      assertRawErrorRecord(response, 400, 'malformed HTTP request');
      assert.equal(await t.store.plants.get(96n), undefined);
    });

    it('a Content-Length that is not a number → 400 malformed request', async () => {
      const response = await rawRequest(port, { parts: [head('Content-Length: 1x\r\n'), '{}'] });
      assertRawErrorRecord(response, 400, 'malformed HTTP request');
    });
  });

  describe('what Node would answer itself, as Error records', () => {
    /** The one answer to `bytes` on a fresh connection, which the server then closes. */
    const only = async (bytes: string): Promise<RawResponse> => {
      const responses = await allResponses(port, bytes);
      assert.equal(responses.length, 1, JSON.stringify(responses));
      return responses[0] as RawResponse;
    };

    it('HTTP/1.1 without Host → 400 Error record, connection closed', async () => {
      const response = await only('GET /healthz HTTP/1.1\r\n\r\n');
      assertRawErrorRecord(response, 400, 'the request has no Host header; HTTP/1.1 requires one');
      assert.equal(response.headers.connection, 'close');
    });
    it('HTTP/1.0 without Host is served (Host is HTTP/1.1\'s requirement)', async () => {
      const response = await only('GET /healthz HTTP/1.0\r\n\r\n');
      assert.equal(response.status, 200, JSON.stringify(response));
    });
    it('an Expect other than 100-continue → 417 Error record', async () => {
      const response = await only(`${head('Expect: 999-foo\r\nContent-Length: 2\r\n')}{}`);
      assertRawErrorRecord(response, 417, 'Expect: "999-foo" cannot be met; only 100-continue is supported');
    });
    it('CONNECT to a host → 404 Error record; CONNECT on a known path → 405 with Allow', async () => {
      assertRawErrorRecord(await only('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'), 404, 'no route for CONNECT example.com:443');
      const known = await only('CONNECT /plants HTTP/1.1\r\nHost: localhost\r\n\r\n');
      assertRawErrorRecord(known, 405, /method CONNECT is not allowed on \/plants/);
      assert.equal(known.headers.allow, 'POST, GET, HEAD');
    });
    for (const method of ['TRACE', 'PROPFIND', 'QUERY', 'PURGE', 'MKCOL']) {
      it(`${method} on a known path → 405 with Allow; on an unknown path → 404`, async () => {
        const known = await rawRequest(port, { parts: [`${method} /plants/1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`] });
        assertRawErrorRecord(known, 405, `method ${method} is not allowed on /plants/{id}; allowed: GET, HEAD, DELETE`);
        assert.equal(known.headers.allow, 'GET, HEAD, DELETE');
        const unknown = await rawRequest(port, { parts: [`${method} /nowhere HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`] });
        assertRawErrorRecord(unknown, 404, `no route for ${method} /nowhere`);
      });
    }
    it('two Authorization headers → 400, whichever comes first, nothing stored', async () => {
      const body = '{"id":71,"name":"twice"}';
      for (const pair of [[t.token, 'wrong'], ['wrong', t.token], [t.token, t.token]]) {
        const request =
          `POST /plants HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n` +
          `Authorization: Bearer ${pair[0]}\r\nAuthorization: Bearer ${pair[1]}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
        const response = await rawRequest(port, { parts: [request] });
        assertRawErrorRecord(response, 400, 'more than one Authorization header: send exactly one');
        assert.match(response.headers['www-authenticate'] ?? '', /error="invalid_request"/);
      }
      assert.equal(await t.store.plants.get(71n), undefined);
    });
    for (const coding of ['gzip, chunked', 'deflate, chunked', 'x-foo, chunked', 'GZIP ,chunked']) {
      it(`Transfer-Encoding: ${coding} → 501 Error record, connection closed, nothing stored`, async () => {
        const body = '{"id":72,"name":"coded"}';
        const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
        const response = await only(head(`Transfer-Encoding: ${coding}\r\n`) + chunked);
        assertRawErrorRecord(response, 501, /^Transfer-Encoding "(gzip|deflate|x-foo)" is not supported; only chunked$/);
        assert.equal(response.headers.connection, 'close');
        assert.equal(await t.store.plants.get(72n), undefined);
      });
    }
  });

  it('leaves the app healthy', async () => {
    assert.equal((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    assert.equal(t.services.writes.backlog, 0);
  });
});
