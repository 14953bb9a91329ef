/**
 * The streamed bulk create (`POST /plants` as application/x-ndjson), on each store: the real app, in-process where the
 * answer is all that matters, listening on 127.0.0.1 where the timing of the stream is the point (403 before any line
 * is read, a client that goes away mid-stream).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { before, describe, it } from 'node:test';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import { generateEventIdPrefix, generateWebhookSecret } from '../../src/webhooks/signature.js';
import { startTestApp, useTestApp } from '../helpers/app.js';
import { DATABASES } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { Receiver } from '../helpers/receiver.js';
import { FakeClock } from '../helpers/clock.js';
import { newToken } from '../helpers/tokens.js';
import { waitFor } from '../helpers/wait.js';

stopPostgresAfterAll();

const NDJSON = 'application/x-ndjson';

/** Result lines as text, each parsed only for its line number and status (ids never pass through a JS number here). */
function resultLines(body: string): Array<{ line: number; status: number; text: string }> {
  return body
    .split('\n')
    .filter((text) => text !== '')
    .map((text) => {
      const parsed = JSON.parse(text) as { line: number; status: number };
      return { line: parsed.line, status: parsed.status, text };
    });
}

/** Counts what the app's whileBulkStreaming was asked to hold, and what it was told to release. */
function streamingHolds() {
  const counts = { held: 0, released: 0 };
  const hold = () => {
    counts.held += 1;
    return () => {
      counts.released += 1;
    };
  };
  return { counts, hold };
}

for (const database of DATABASES) {
  describe(`streamed bulk create on ${database.kind}`, () => {
    const holds = streamingHolds();
    const t = useTestApp(
      database.create,
      { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '30ms,30ms' },
      { webhookPollIntervalMs: 50, whileBulkStreaming: holds.hold },
    );
    let port: number;
    const bulk = (payload: string, headers: Record<string, string> = { ...t.headers, 'content-type': NDJSON }) =>
      t.app.inject({ method: 'POST', url: '/plants', headers, payload });

    before(async () => {
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      port = (t.app.server.address() as AddressInfo).port;
    });

    it('answers good, bad, replayed and conflicting lines line by line, in order, with exact int64 ids stored', async () => {
      await t.store.plants.create([{ id: 77n, name: 'stored', tag: null }]);
      const lines = [
        '{"id":9007199254740993,"name":"exact","tag":"t"}',
        `{"id":${INT64_MAX},"name":"max"}`,
        '',
        '{"id":1,"name":""}',
        'not json',
        '{"id":77,"name":"stored"}',
        '{"id":77,"name":"other"}',
        '   ',
        `{"id":${INT64_MIN},"name":"min"}`,
        '{"id":9223372036854775808,"name":"too big"}',
        '{"id":9007199254740993,"name":"exact","tag":"t"}',
        '{"id":5,"name":"extra","colour":"green"}',
      ];
      const heldBefore = holds.counts.held;
      const response = await bulk(`${lines.join('\n')}\n`);
      assert.equal(response.statusCode, 200);
      assert.match(String(response.headers['content-type']), /^application\/x-ndjson/);
      // The stream held the heap's growth while it ran (src/serve/old-generation.ts), and let it go as it ended.
      assert.equal(holds.counts.held, heldBefore + 1, 'the stream held the heap growth');
      await waitFor('the stream to release its hold', () => holds.counts.released === holds.counts.held);
      const results = resultLines(response.body);
      // Blank lines (3 and 8) are skipped and keep their number.
      assert.deepEqual(results.map(({ line, status }) => [line, status]), [
        [1, 200], [2, 200], [4, 400], [5, 400], [6, 200], [7, 409], [9, 200], [10, 400], [11, 200], [12, 400],
      ]);
      assert.equal(results[0]?.text, '{"line":1,"status":200,"plant":{"name":"exact","tag":"t"},"created":true}');
      assert.equal(results[2]?.text, '{"line":4,"status":400,"error":400,"message":"body.name must not be empty"}');
      assert.equal(results[4]?.text, '{"line":6,"status":200,"plant":{"name":"stored"},"created":false}');
      assert.match(results[5]?.text ?? '', /^\{"line":7,"status":409,"error":409,"message":"[^"]+"\}$/);
      assert.match(results[7]?.text ?? '', /int64/);
      assert.match(results[9]?.text ?? '', /unknown property 'colour'/);
      for (const [id, name] of [['9007199254740993', 'exact'], [INT64_MAX, 'max'], [INT64_MIN, 'min']] as const) {
        const stored = await t.app.inject({ method: 'GET', url: `/plants/${id}`, headers: t.headers });
        assert.equal(stored.statusCode, 200);
        assert.match(stored.body, new RegExp(`^\\{"id":${id},"name":"${name}"`));
      }
      assert.equal((await t.store.plants.get(1n)), undefined);
      assert.equal((await t.store.plants.get(77n))?.name, 'stored');
      assert.equal((await t.store.plants.get(9007199254740992n)), undefined);
    });

    it('keeps the single application/json create as it was', async () => {
      const response = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: '{"id":1,"name":""}' });
      assert.equal(response.statusCode, 400);
      assert.equal(response.body, '{"error":400,"message":"body.name must not be empty"}');
    });

    it('answers a line over BODY_LIMIT_BYTES 413 alone and goes on', async () => {
      const long = `{"id":31,"name":"${'x'.repeat(t.config.limits.bodyBytes)}"}`;
      const response = await bulk(`{"id":30,"name":"a"}\n${long}\n{"id":32,"name":"c"}\n`);
      assert.deepEqual(resultLines(response.body).map(({ line, status }) => [line, status]), [[1, 200], [2, 413], [3, 200]]);
    });

    it('ends with a 413 line after BULK_MAX_LINES lines, the rest unread', async () => {
      const local = await startTestApp(t.databaseUrl, { BULK_MAX_LINES: '2' });
      try {
        const response = await local.app.inject({
          method: 'POST',
          url: '/plants',
          headers: { ...local.headers, 'content-type': NDJSON },
          payload: '{"id":40,"name":"a"}\n{"id":41,"name":"b"}\n{"id":42,"name":"c"}\n{"id":43,"name":"d"}\n',
        });
        assert.deepEqual(resultLines(response.body).map(({ line, status }) => [line, status]), [[1, 200], [2, 200], [3, 413]]);
        assert.equal(await local.store.plants.get(42n), undefined);
      } finally {
        await local.close();
      }
    });

    /** A bulk request with one line sent and the request left open. */
    function openStream(authorization: string): http.ClientRequest {
      const request = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/plants',
        headers: { authorization, 'content-type': NDJSON, 'transfer-encoding': 'chunked' },
      });
      request.on('error', () => undefined);
      return request;
    }

    it('answers each line as it commits, while the request is still open', async () => {
      const request = openStream(t.headers.authorization as string);
      request.write('{"id":51,"name":"first"}\n');
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      assert.equal(response.statusCode, 200);
      const [first] = (await once(response, 'data')) as [Buffer];
      assert.equal(String(first), '{"line":1,"status":200,"plant":{"name":"first"},"created":true}\n');
      assert.equal((await t.store.plants.get(51n))?.name, 'first');
      request.end('{"id":52,"name":"second"}\n');
      let rest = '';
      for await (const chunk of response) rest += String(chunk);
      assert.equal(rest, '{"line":2,"status":200,"plant":{"name":"second"},"created":true}\n');
    });

    it('answers a token without plants:create 403 before reading any line', async () => {
      const reader = generateToken();
      await t.store.tokens.add(newToken(`reader-${Date.now()}`, hashToken(reader), { scopes: ['plants:read'] }));
      const request = openStream(`Bearer ${reader}`);
      // One line is sent and the request is left open: the answer must come without the rest.
      request.write('{"id":50,"name":"never"}\n');
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      let body = '';
      for await (const chunk of response) body += String(chunk);
      request.destroy();
      assert.equal(response.statusCode, 403);
      assert.equal((JSON.parse(body) as { error: number }).error, 403);
      assert.match(String(response.headers['www-authenticate']), /insufficient_scope/);
      assert.equal(await t.store.plants.get(50n), undefined);
    });

    it('leaves every answered line stored, and each stored plant whole, when the client goes away mid-stream', async () => {
      const first = 1_000_000;
      const count = 50_000;
      const request = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/plants',
        headers: { authorization: t.headers.authorization as string, 'content-type': NDJSON, 'transfer-encoding': 'chunked' },
      });
      request.on('error', () => undefined);
      // Written as the request drains, so the server reads while it answers; the client leaves after some answers.
      let sent = 0;
      const writeMore = () => {
        while (sent < count) {
          let text = '';
          for (let i = 0; i < 500 && sent < count; i += 1, sent += 1) text += `{"id":${first + sent},"name":"n${first + sent}","tag":"bulk"}\n`;
          if (!request.write(text)) return void request.once('drain', writeMore);
        }
        request.end();
      };
      writeMore();
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      assert.equal(response.statusCode, 200);
      let text = '';
      const answered: number[] = [];
      for await (const chunk of response) {
        text += String(chunk);
        const end = text.lastIndexOf('\n');
        for (const result of resultLines(text.slice(0, end + 1))) {
          assert.equal(result.status, 200, result.text);
          answered.push(result.line);
        }
        text = text.slice(end + 1);
        if (answered.length >= 3000) break;
      }
      request.destroy();
      response.destroy();
      assert.ok(answered.length >= 3000 && answered.length < count, `answered ${answered.length}`);
      await t.services.writes.drain();
      // A stream cut off by its client lets go of its hold as well.
      await waitFor('the cut-off stream to release its hold', () => holds.counts.released === holds.counts.held);
      // Every answered line is stored as sent, in order from line 1; nothing past what was sent, nothing altered.
      assert.deepEqual(answered, answered.map((_, index) => index + 1));
      const stored = await t.store.plants.list({ limit: count + 10, after: BigInt(first - 1), tag: 'bulk' });
      assert.ok(stored.length >= answered.length, `stored ${stored.length} of ${answered.length} answered`);
      assert.ok(stored.length < count, 'the server stopped reading once the client left');
      stored.forEach((plant, index) => {
        assert.equal(plant.id, BigInt(first + index));
        assert.equal(plant.name, `n${first + index}`);
      });
    });

    it('stops reading the request while the client does not read the answer', async () => {
      const first = 5_000_000;
      const count = 400_000;
      const request = openStream(t.headers.authorization as string);
      let sent = 0;
      const writeMore = () => {
        while (sent < count) {
          let text = '';
          for (let i = 0; i < 1000; i += 1, sent += 1) text += `{"id":${first + sent},"name":"p"}\n`;
          if (!request.write(text)) return void request.once('drain', writeMore);
        }
        request.end();
      };
      writeMore();
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      // Never read: the answer piles up in the socket buffers, and then the server must stop taking lines.
      response.pause();
      const storedCount = async () => (await t.store.plants.list({ limit: count, after: BigInt(first - 1) })).length;
      let before = -1;
      let now = await storedCount();
      const deadline = performance.now() + 20_000;
      while (now !== before && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        before = now;
        now = await storedCount();
      }
      request.destroy();
      assert.equal(now, before, 'the server kept taking lines that no one read the answers to');
      // What is stored is what the window and the buffers between the two ends hold answers for: a fraction of the request.
      assert.ok(now > 0 && now < count / 3, `stored ${now} of ${count}, ${sent} sent`);
    });

    it('takes one rate-limit token per line, waiting for the next token instead of refusing', async () => {
      const clock = new FakeClock();
      // 1 token per 1000 ms, 3 at once: the request takes one, lines 1 and 2 the others, line 3 waits for the clock.
      const limited = await startTestApp(t.databaseUrl, { RATE_LIMIT_MAX: '1', RATE_LIMIT_WINDOW_MS: '1000', RATE_LIMIT_BURST: '3' }, { now: clock.now });
      try {
        await limited.app.listen({ host: '127.0.0.1', port: 0 });
        const request = http.request({
          host: '127.0.0.1',
          port: (limited.app.server.address() as AddressInfo).port,
          method: 'POST',
          path: '/plants',
          headers: { authorization: limited.headers.authorization, 'content-type': NDJSON },
        });
        request.end([70, 71, 72, 73].map((id) => `{"id":${id},"name":"r"}\n`).join(''));
        const [response] = (await once(request, 'response')) as [http.IncomingMessage];
        assert.equal(response.statusCode, 200);
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        const ended = once(response, 'end');
        const answered = async (lines: number) => {
          for (let waited = 0; body.split('\n').length - 1 < lines; waited += 10) {
            assert.ok(waited < 5000, `waiting for ${lines} lines, got: ${body}`);
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        };
        await answered(2);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(body.split('\n').length - 1, 2, 'line 3 waits for a token');
        assert.equal(await limited.store.plants.get(72n), undefined);
        clock.advance(1000);
        await answered(3);
        clock.advance(1000);
        await answered(4);
        await ended;
        assert.deepEqual(resultLines(body).map(({ status }) => status), [200, 200, 200, 200]);
      } finally {
        await limited.close();
      }
    });

    it('outlasts REQUEST_TIMEOUT_MS while lines keep coming, and ends with a 408 line once they stop for that long', async () => {
      const timed = await startTestApp(t.databaseUrl, { REQUEST_TIMEOUT_MS: '700' });
      try {
        await timed.app.listen({ host: '127.0.0.1', port: 0 });
        const request = http.request({
          host: '127.0.0.1',
          port: (timed.app.server.address() as AddressInfo).port,
          method: 'POST',
          path: '/plants',
          headers: { authorization: timed.headers.authorization, 'content-type': NDJSON, 'transfer-encoding': 'chunked' },
        });
        request.on('error', () => undefined);
        const started = performance.now();
        let sent = 0;
        const response = once(request, 'response') as Promise<[http.IncomingMessage]>;
        // One line every 250 ms for 2 s: three times the whole-request timeout, never idle for as long as it.
        await new Promise<void>((resolve) => {
          const timer = setInterval(() => {
            sent += 1;
            request.write(`{"id":${80 + sent},"name":"slow"}\n`);
            if (sent === 8) {
              clearInterval(timer);
              resolve();
            }
          }, 250);
        });
        // Then nothing: the request is left open.
        const [answer] = await response;
        let body = '';
        for await (const chunk of answer) body += String(chunk);
        request.destroy();
        assert.ok(performance.now() - started > 2000);
        const results = resultLines(body);
        assert.deepEqual(results.map(({ line, status }) => [line, status]), [[1, 200], [2, 200], [3, 200], [4, 200], [5, 200], [6, 200], [7, 200], [8, 200], [9, 408]]);
        assert.match(results[8]?.text ?? '', /"error":408,"message":"the request sent nothing for 700 ms/);
      } finally {
        await timed.close();
      }
    });

    /** Streams `count` lines (ids from `first`) to `targetPort` as the server reads them; `response` is its answer. */
    function sendLines(targetPort: number, authorization: string, first: number, count: number, tag: string) {
      const request = http.request({
        host: '127.0.0.1',
        port: targetPort,
        method: 'POST',
        path: '/plants',
        headers: { authorization, 'content-type': NDJSON, 'transfer-encoding': 'chunked' },
      });
      request.on('error', () => undefined);
      let sent = 0;
      const writeMore = () => {
        while (sent < count) {
          let text = '';
          for (let i = 0; i < 250 && sent < count; i += 1, sent += 1) text += `{"id":${first + sent},"name":"n${first + sent}","tag":"${tag}"}\n`;
          if (!request.write(text)) return void request.once('drain', writeMore);
        }
        request.end();
      };
      writeMore();
      return { request, response: once(request, 'response') as Promise<[http.IncomingMessage]> };
    }

    /** The whole answer of a stream, as result lines. */
    async function readAnswer(response: http.IncomingMessage): Promise<Array<{ line: number; status: number; text: string }>> {
      let body = '';
      response.setEncoding('utf8');
      for await (const chunk of response) body += String(chunk);
      return resultLines(body);
    }

    it('makes streams wait for room in a full write queue instead of refusing lines, and serves a single create meanwhile', async () => {
      // 20 streams of 300 lines against a queue of 64: each stream's window alone is far past it.
      const STREAMS = 20;
      const LINES = 300;
      const first = 7_000_000;
      const small = await startTestApp(t.databaseUrl, { WRITE_QUEUE_LIMIT: '64' });
      try {
        await small.app.listen({ host: '127.0.0.1', port: 0 });
        const smallPort = (small.app.server.address() as AddressInfo).port;
        const streams = Array.from({ length: STREAMS }, (_, index) => sendLines(smallPort, small.headers.authorization as string, first + index * LINES, LINES, 'waits'));
        const single = await fetch(`http://127.0.0.1:${smallPort}/plants`, {
          method: 'POST',
          headers: small.headers,
          body: '{"id":6999999,"name":"single"}',
        });
        assert.equal(single.status, 200, await single.text());
        const answers = await Promise.all(streams.map(async ({ response }) => readAnswer((await response)[0])));
        for (const [index, results] of answers.entries()) {
          assert.equal(results.length, LINES, `stream ${index} answered every line`);
          assert.deepEqual(results.filter(({ status }) => status !== 200).map(({ text }) => text), [], `stream ${index}: no line refused`);
        }
        const stored = await small.store.plants.list({ limit: STREAMS * LINES + 10, after: BigInt(first - 1), tag: 'waits' });
        assert.equal(stored.length, STREAMS * LINES);
        assert.equal((await small.store.plants.get(6999999n))?.name, 'single');
      } finally {
        await small.close();
      }
    });

    it('at close, stops reading a stream, answers every line it read, and ends it with a 503 line', async () => {
      const first = 8_000_000;
      const count = 1_000_000;
      const closing = await startTestApp(t.databaseUrl);
      try {
        await closing.app.listen({ host: '127.0.0.1', port: 0 });
        const { request, response } = sendLines((closing.app.server.address() as AddressInfo).port, closing.headers.authorization as string, first, count, 'closing');
        const [answer] = await response;
        answer.setEncoding('utf8');
        let body = '';
        let closed: Promise<void> | undefined;
        for await (const chunk of answer) {
          body += String(chunk);
          // Close once some lines are answered: the stream is mid-way.
          if (closed === undefined && body.split('\n').length > 2000) closed = closing.app.close();
        }
        request.destroy();
        await closed;
        const results = resultLines(body);
        const last = results.at(-1);
        const answered = results.slice(0, -1);
        assert.ok(answered.length >= 2000 && answered.length < count, `answered ${answered.length}`);
        assert.deepEqual(answered.filter(({ status }) => status !== 200).map(({ text }) => text), []);
        assert.deepEqual(answered.map(({ line }) => line), answered.map((_, index) => index + 1), 'every line read is answered, in order');
        assert.equal(last?.status, 503);
        assert.equal(last?.line, answered.length + 1);
        assert.match(last?.text ?? '', /"error":503,"message":"the server is shutting down; lines from \d+ on were not read/);
        await closing.services.close();
        const stored = await closing.store.plants.list({ limit: count, after: BigInt(first - 1), tag: 'closing' });
        // Every line answered 200 is stored, and nothing past the first line the 503 names.
        assert.equal(stored.length, answered.length);
        assert.equal(stored.at(-1)?.id, BigInt(first + answered.length - 1));
      } finally {
        await closing.close();
      }
    });

    it('writes one webhook event per created line, none for replays, conflicts or bad lines', async () => {
      const hook = await Receiver.start();
      try {
        await t.store.webhookSubscriptions.add({ name: `bulk-${Date.now()}`, url: hook.url(), secret: generateWebhookSecret(), idPrefix: generateEventIdPrefix(), createdAt: new Date() });
        const response = await bulk(
          ['{"id":60,"name":"a"}', '{"id":61,"name":"b"}', '{"id":60,"name":"a"}', '{"id":61,"name":"c"}', '{"id":62}', '{"id":9007199254740995,"name":"d"}'].join('\n'),
        );
        assert.deepEqual(resultLines(response.body).map(({ status }) => status), [200, 200, 200, 409, 400, 200]);
        await hook.waitForCount(3);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.deepEqual(hook.received.map((received) => received.body).sort(), [
          '{"id":60,"name":"a"}',
          '{"id":61,"name":"b"}',
          '{"id":9007199254740995,"name":"d"}',
        ]);
      } finally {
        await hook.close();
      }
    });
  });
}
