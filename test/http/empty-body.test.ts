/**
 * Every operation that takes a body, sent none (issue 37 item 8): a 400 Error record that says so, in each way of
 * sending nothing, and the keep-alive connection it came on serves the next request. The operations are those the
 * OpenAPI document gives a requestBody, so a route added later is covered without touching this file.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { before, describe, it } from 'node:test';
import type { InjectOptions } from 'fastify';
import { useTestApp } from '../helpers/app.js';
import { assertErrorRecord, assertRawErrorRecord } from '../helpers/assertions.js';
import { sqliteDatabase } from '../helpers/databases.js';
import { parseResponse } from '../helpers/process.js';

const REQUIRED = 'request body is required';

/** Each way of sending no body: the headers it adds and, on a socket, the body bytes after the head. */
const NO_BODY: ReadonlyArray<{ readonly way: string; readonly headers: Readonly<Record<string, string>>; readonly raw: string }> = [
  { way: 'no body and no Content-Type', headers: {}, raw: '' },
  { way: 'Content-Length: 0', headers: { 'content-length': '0' }, raw: '' },
  { way: 'Content-Length: 0 with Content-Type: application/json', headers: { 'content-length': '0', 'content-type': 'application/json' }, raw: '' },
  { way: 'a chunked body of no chunk', headers: { 'transfer-encoding': 'chunked' }, raw: '0\r\n\r\n' },
  {
    way: 'a chunked body of no chunk with Content-Type: application/json',
    headers: { 'transfer-encoding': 'chunked', 'content-type': 'application/json' },
    raw: '0\r\n\r\n',
  },
];

interface BodyOperation {
  readonly method: string;
  /** The OpenAPI path with every parameter filled in. */
  readonly url: string;
}

/** Every operation of the document with a requestBody. */
function bodyOperations(document: { paths: Record<string, Record<string, { requestBody?: unknown }>> }): BodyOperation[] {
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.entries(operations)
      .filter(([, operation]) => operation.requestBody !== undefined)
      .map(([method]) => ({ method: method.toUpperCase(), url: path.replace(/\{\w+\}/g, '1') })),
  );
}

/** Reads answers off one keep-alive connection, one per call. */
function answers(socket: Socket) {
  let buffered = Buffer.alloc(0);
  let closed = false;
  socket.on('data', (chunk: Buffer) => (buffered = Buffer.concat([buffered, chunk])));
  socket.on('close', () => (closed = true));
  return async () => {
    for (;;) {
      const answer = parseResponse(buffered);
      if (answer && buffered.length >= buffered.indexOf('\r\n\r\n') + 4 + Number(answer.headers['content-length'] ?? 0)) {
        buffered = buffered.subarray(buffered.indexOf('\r\n\r\n') + 4 + Number(answer.headers['content-length'] ?? 0));
        return answer;
      }
      assert.equal(closed, false, 'the connection was closed before an answer');
      await Promise.race([once(socket, 'data'), once(socket, 'close')]);
    }
  };
}

describe('an operation that takes a body, sent none', () => {
  const t = useTestApp(sqliteDatabase);
  let operations: BodyOperation[];

  before(async () => {
    operations = bodyOperations((await t.app.inject({ method: 'GET', url: '/openapi.json' })).json());
    await t.app.listen({ host: '127.0.0.1', port: 0 });
  });

  it('the document lists the operations that take one, and says what their 400 is', async () => {
    assert.ok(operations.some(({ method, url }) => method === 'POST' && url === '/plants'), JSON.stringify(operations));
    const document = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    for (const { method, url } of operations) {
      const path = Object.keys(document.paths).find((candidate) => candidate.replace(/\{\w+\}/g, '1') === url) as string;
      const description = document.paths[path][method.toLowerCase()].responses['400']?.description as string | undefined;
      assert.match(description ?? '', /no body where the operation takes one/, `${method} ${path}`);
    }
  });

  it('answers 400 "request body is required" in every way of sending nothing, with or without a query string', async () => {
    for (const { method, url } of operations) {
      for (const query of ['', '?x=1']) {
        for (const { way, headers } of NO_BODY) {
          const request: InjectOptions = { method: method as InjectOptions['method'], url: `${url}${query}`, headers: { authorization: `Bearer ${t.token}`, ...headers } };
          const response = await t.app.inject(request);
          assert.equal(response.statusCode, 400, `${method} ${url}${query}, ${way}: ${response.body}`);
          assertErrorRecord(response, 400, REQUIRED);
        }
      }
    }
  });

  it('keeps the keep-alive connection usable: the next request on it is served', async () => {
    const { port } = t.app.server.address() as { port: number };
    for (const { method, url } of operations) {
      const socket = connect(port, '127.0.0.1');
      const next = answers(socket);
      try {
        for (const [index, { way, headers, raw }] of NO_BODY.entries()) {
          const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
          socket.write(`${method} ${url}?x=${index} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${t.token}\r\n${lines}\r\n${raw}`);
          const answer = await next();
          assertRawErrorRecord(answer, 400, REQUIRED);
          assert.notEqual(answer.headers.connection, 'close', `${method} ${url}, ${way}: the connection is closed after the 400`);
        }
        // Then a create, served on the same connection.
        const plant = `{"id":9007199254740993,"name":"after an empty body"}`;
        socket.write(
          `POST /plants HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${t.token}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(plant)}\r\n\r\n${plant}`,
        );
        const created = await next();
        assert.equal(created.status, 200, created.body);
        assert.deepEqual(JSON.parse(created.body), { name: 'after an empty body' });
      } finally {
        socket.destroy();
      }
    }
  });
});
