/**
 * The undocumented Node behaviour src/http/node-internals.ts relies on, each checked on a real server of this Node
 * release: a failure here names the trick that no longer works.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerOptions } from 'node:http';
import { connect, Socket, type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { TLSSocket } from 'node:tls';
import { destroyWithoutStackTraces, interposeConnections, PARSING_STOPPABLE, StoppingIncomingMessage, stopsParsing, tcpSocketOf } from '../../src/http/node-internals.js';

async function listening(server: ReturnType<typeof createServer>): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

describe('the Node behaviour src/http/node-internals.ts relies on', () => {
  it('interposeConnections: an accepted socket is not read until it is served, then it is parsed and answered', async () => {
    const requests: string[] = [];
    const server = createServer((request, response) => {
      requests.push(request.url ?? '');
      response.end('ok');
    });
    let serve: (() => void) | undefined;
    let pausedOnAccept: boolean | undefined;
    interposeConnections(server, (socket, go) => {
      pausedOnAccept = socket.isPaused();
      serve = go;
    });
    const port = await listening(server);
    try {
      const client = connect(port, '127.0.0.1');
      client.write('GET /held HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
      let answer = '';
      client.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      while (!serve) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(pausedOnAccept, true, 'each socket reaches accept paused');
      assert.deepEqual(requests, [], 'nothing is parsed before the socket is served');
      serve();
      await once(client, 'close');
      assert.deepEqual(requests, ['/held']);
      assert.match(answer, /^HTTP\/1\.1 200/);
    } finally {
      server.close();
    }
  });

  it('tcpSocketOf: a server-side TLS socket keeps the TCP socket it runs on', () => {
    const tcp = new Socket();
    const tls = new TLSSocket(tcp, { isServer: true });
    try {
      assert.equal(tcpSocketOf(tls), tcp);
    } finally {
      tls.destroy();
      tcp.destroy();
    }
  });

  it('StoppingIncomingMessage: once a connection is destroyed, the next request parsed on it ends the parsing of that read', { skip: PARSING_STOPPABLE ? false : 'this Node does not ask shouldUpgradeCallback' }, async () => {
    let parsed = 0;
    const options = { IncomingMessage: StoppingIncomingMessage, shouldUpgradeCallback: stopsParsing } as ServerOptions;
    const server = createServer(options, (request: IncomingMessage) => {
      parsed += 1;
      request.socket.destroy();
    });
    const port = await listening(server);
    try {
      const client = connect(port, '127.0.0.1');
      client.on('error', () => undefined);
      client.write('GET / HTTP/1.1\r\nHost: a\r\n\r\n'.repeat(200));
      await once(client, 'close');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(parsed, 1, 'the requests after the first of the read are not handed over');
    } finally {
      server.close();
    }
  });

  it('destroyWithoutStackTraces: the errors Node aborts unanswered requests with are made in the close listeners, without stacks, and the limit is restored', async () => {
    const aborted: Array<Error | null> = [];
    const server = createServer((request) => {
      request.on('error', () => undefined);
      request.once('close', () => aborted.push(request.errored));
      if (request.url === '/last') destroyWithoutStackTraces(request.socket);
    });
    const port = await listening(server);
    const limit = Error.stackTraceLimit;
    try {
      const client = connect(port, '127.0.0.1');
      client.on('error', () => undefined);
      client.write('POST /first HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n');
      await new Promise((resolve) => setTimeout(resolve, 50));
      client.write('12345GET /last HTTP/1.1\r\nHost: a\r\n\r\n');
      await once(client, 'close');
      while (aborted.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(Error.stackTraceLimit, limit);
      const errors = aborted.filter((error): error is Error => error !== null);
      assert.ok(errors.length > 0, 'Node aborts the unanswered requests with an error');
      for (const error of errors) assert.doesNotMatch(error.stack ?? '', /\n\s+at /, 'made while stack traces were off');
    } finally {
      server.close();
    }
  });
});
