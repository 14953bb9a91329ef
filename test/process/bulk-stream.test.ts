/**
 * The streamed bulk create as a real server process: SIGKILL mid-stream loses no line that was answered 200 (with one
 * thread and with worker threads), SIGTERM mid-stream ends the stream with a 503 line and the process exits 0, a client
 * that sends past BULK_MAX_LINES before it reads gets its 413 line, and `plantstore push` sends a file through the bin
 * and reports what it got.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { openBulkCreate } from '../helpers/bulk.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { CLI, createToken, startServer } from '../helpers/process.js';

const LINES = 200_000;

/** Streams LINES lines to the server and kills it once `killAfter` lines are answered; resolves with the lines answered 200. */
async function streamAndKill(base: string, token: string, killAfter: number, kill: () => void): Promise<number[]> {
  const request = openBulkCreate(base, token);
  request.on('error', () => undefined);
  let sent = 0;
  const writeMore = () => {
    while (sent < LINES) {
      let text = '';
      for (let i = 0; i < 1000; i += 1, sent += 1) text += `{"id":${-9223372036854775808n + BigInt(sent)},"name":"n${sent}","tag":"k${sent % 7}"}\n`;
      if (!request.write(text)) return void request.once('drain', writeMore);
    }
    request.end();
  };
  writeMore();
  const [response] = (await once(request, 'response')) as [http.IncomingMessage];
  assert.equal(response.statusCode, 200);
  const answered: number[] = [];
  let text = '';
  let killed = false;
  try {
    for await (const chunk of response) {
      text += String(chunk);
      const end = text.lastIndexOf('\n');
      for (const line of text.slice(0, end + 1).split('\n')) {
        if (line === '') continue;
        const result = JSON.parse(line) as { line: number; status: number };
        assert.equal(result.status, 200, line);
        answered.push(result.line);
      }
      text = text.slice(end + 1);
      if (!killed && answered.length >= killAfter) {
        killed = true;
        kill();
      }
    }
  } catch {
    // The connection dies with the server.
  }
  return answered;
}

describe('streamed bulk create, as a process', () => {
  const cleanups: Array<() => Promise<void>> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  for (const workers of [1, 2]) {
    it(`loses no line answered 200 when SIGKILLed mid-stream (WORKERS=${workers})`, async () => {
      const db: TestDatabase = await sqliteDatabase();
      cleanups.push(() => db.cleanup());
      const env = { DATABASE_URL: db.url, WORKERS: String(workers) };
      const token = createToken('bulk', env);
      const server = await startServer(env);
      cleanups.push(() => server.kill());
      const answered = await streamAndKill(server.base, token, 20_000, () => server.child.kill('SIGKILL'));
      await server.kill();
      assert.ok(answered.length >= 20_000 && answered.length < LINES, `answered ${answered.length} of ${LINES}`);
      assert.deepEqual(answered.slice(0, 5), [1, 2, 3, 4, 5]);
      const store = await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database);
      try {
        for (const line of answered) {
          const index = line - 1;
          const stored = await store.plants.get(-9223372036854775808n + BigInt(index));
          assert.deepEqual(stored, { id: -9223372036854775808n + BigInt(index), name: `n${index}`, tag: `k${index % 7}` }, `line ${line}`);
        }
      } finally {
        await store.close();
      }
    });
  }

  for (const workers of [1, 2]) {
    it(`at SIGTERM mid-stream, answers every line it read, ends the stream with a 503 line and exits 0 (WORKERS=${workers})`, async () => {
      const db: TestDatabase = await sqliteDatabase();
      cleanups.push(() => db.cleanup());
      const env = { DATABASE_URL: db.url, WORKERS: String(workers) };
      const token = createToken('bulk-sigterm', env);
      const server = await startServer(env);
      cleanups.push(() => server.kill());
      const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
      const request = openBulkCreate(server.base, token);
      request.on('error', () => undefined);
      // More lines than the stream can take before the signal: it is mid-way when the server shuts down.
      const LINES_SENT = 2_000_000;
      let sent = 0;
      const writeMore = () => {
        while (sent < LINES_SENT && !request.destroyed) {
          let text = '';
          for (let i = 0; i < 1000; i += 1, sent += 1) text += `{"id":${sent + 1},"name":"n${sent + 1}"}\n`;
          if (!request.write(text)) return void request.once('drain', writeMore);
        }
        request.end();
      };
      writeMore();
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      response.setEncoding('utf8');
      let body = '';
      let signalled = false;
      for await (const chunk of response) {
        body += String(chunk);
        if (!signalled && body.length > 200_000) {
          signalled = true;
          server.child.kill('SIGTERM');
        }
      }
      request.destroy();
      assert.equal(await exited, 0, server.output().stderr);
      const results = body.split('\n').filter((line) => line !== '').map((line) => ({ text: line, ...(JSON.parse(line) as { line: number; status: number }) }));
      const last = results.at(-1);
      const answered = results.slice(0, -1);
      assert.ok(answered.length > 0 && answered.length < LINES_SENT, `answered ${answered.length}`);
      assert.deepEqual(answered.filter(({ status }) => status !== 200).map(({ text }) => text), []);
      assert.equal(last?.status, 503, last?.text);
      assert.equal(last?.line, answered.length + 1);
      assert.match(last?.text ?? '', /the server is shutting down/);
      const store = await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database);
      try {
        // Every line answered 200 is stored, and none from the line the 503 names on.
        assert.equal((await store.plants.list({ limit: answered.length + 10 })).length, answered.length);
        assert.equal((await store.plants.get(BigInt(answered.length)))?.name, `n${answered.length}`);
      } finally {
        await store.close();
      }
    });
  }

  // Many simple clients (Python's requests, curl --data-binary from a pipe) send the whole body before they read;
  // others read as they send, and Node's sockets end their own sending when the server's end arrives. 64 MiB of blank
  // lines is more than the kernel's socket buffers hold: a server that stops reading at the limit stalls the first
  // kind until it closes the connection, which the kernel then resets under the answer, and a server that ends the
  // connection while the rest is still coming makes the second kind's next write fail.
  for (const client of ['reads only once it has sent everything', 'reads as it sends'] as const) {
    it(`past BULK_MAX_LINES, reads and drops the rest of the request before it closes: a client that ${client} sends it all and gets the final 413 line`, async () => {
      const db: TestDatabase = await sqliteDatabase();
      cleanups.push(() => db.cleanup());
      const env = { DATABASE_URL: db.url, BULK_MAX_LINES: '1000' };
      const token = createToken('bulk-over', env);
      const server = await startServer(env);
      cleanups.push(() => server.kill());
      const socket = connect(server.port, '127.0.0.1');
      await once(socket, 'connect');
      const received: Buffer[] = [];
      const closed = new Promise<string | undefined>((resolve) => {
        socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
        socket.on('close', () => resolve(undefined));
      });
      if (client === 'reads as it sends') socket.on('data', (data: Buffer) => received.push(data));
      else socket.pause();
      const write = (text: string) =>
        new Promise<string | undefined>((resolve) => socket.write(text, (error) => resolve(error ? ((error as NodeJS.ErrnoException).code ?? error.message) : undefined)));
      const chunk = '\n'.repeat(1 << 20);
      // The one that reads as it sends asks for the connection to close, as Node's client does without an agent: the
      // answer then says so too, and Node would end and destroy the connection at once after it.
      const connection = client === 'reads as it sends' ? 'Connection: close\r\n' : '';
      let writeError = await write(
        `POST /plants HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n${connection}\r\n`,
      );
      for (let sent = 0; sent < 64 && writeError === undefined; sent += 1) writeError = await write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      writeError ??= await write('0\r\n\r\n');
      assert.equal(writeError, undefined, 'every write of the request succeeded');
      if (client === 'reads only once it has sent everything') {
        socket.on('data', (data: Buffer) => received.push(data));
        socket.resume();
      }
      assert.equal(await closed, undefined, 'the connection ended without an error');
      const answer = Buffer.concat(received).toString('utf8');
      assert.match(answer, /^HTTP\/1\.1 200 /);
      assert.match(answer, /\{"line":1001,"status":413,"error":413,"message":"the request has more than 1000 lines \(BULK_MAX_LINES\)[^"]*"\}\n/);
      assert.equal(server.exited(), false);
    });
  }

  it('plantstore push sends a file and reports created, replayed, conflicts and bad lines', async () => {
    const db = await sqliteDatabase();
    cleanups.push(() => db.cleanup());
    const env = { DATABASE_URL: db.url };
    const token = createToken('pusher', env);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-push-'));
    cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const file = path.join(dir, 'plants.jsonl');
    const lines = [
      '{"id":9223372036854775807,"name":"max"}',
      '{"id":9007199254740993,"name":"exact","tag":"t"}',
      '',
      '{"id":9007199254740993,"name":"exact","tag":"t"}',
      '{"id":9007199254740993,"name":"other"}',
      '{"id":3,"name":""}',
    ];
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const server = await startServer(env);
    cleanups.push(() => server.kill());
    const result = spawnSync(process.execPath, [CLI, 'push', file, '--url', server.base, '--token-file', tokenFile], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    assert.equal(result.status, 1, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /^line 5: 409 /m);
    assert.match(result.stderr, /^line 6: 400 body\.name must not be empty$/m);
    assert.match(result.stderr, /push: 5 lines answered: 2 created, 1 replayed, 1 conflicts, 1 bad lines, 0 refused\n$/);
    assert.ok(!result.stderr.includes(token), 'the token is never printed');
    const stored = await fetch(`${server.base}/plants/9007199254740993`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(await stored.text(), '{"id":9007199254740993,"name":"exact","tag":"t"}');

    const refused = spawnSync(process.execPath, [CLI, 'push', file, '--url', server.base, '--token-file', path.join(dir, 'missing')], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    assert.notEqual(refused.status, 0);
  });
});
