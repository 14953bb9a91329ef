/**
 * A request that lasts is checked as long as it lasts: an event stream or a streamed bulk create whose token is
 * revoked or expires while it is open stops within TOKEN_CACHE_MS (a reload of the token map, or the expiry's own
 * timer), the stream with a last `token-refused` event, the bulk create with a last 401 line and nothing stored after
 * it. On each store, through real sockets (streams need one).
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { openBulkCreate } from '../helpers/bulk.js';
import { DATABASES } from '../helpers/databases.js';
import { EventStreamClient } from '../helpers/event-stream.js';
import { plantJson } from '../helpers/plants.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { newToken } from '../helpers/tokens.js';

stopPostgresAfterAll();

const CACHE_MS = 150;

async function listening(t: TestApp): Promise<string> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

async function create(t: TestApp, id: number): Promise<void> {
  const response = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: plantJson(String(id), `plant ${id}`) });
  assert.equal(response.statusCode, 200, response.body);
}

/** A second token, stored now, which the test revokes or lets expire. */
async function extraToken(t: TestApp, name: string, expiresAt: Date | null = null): Promise<string> {
  const token = generateToken();
  await t.store.tokens.add(newToken(name, hashToken(token), { expiresAt }));
  return token;
}

/** Creates a plant every few milliseconds until `until` settles; answers the ids created. */
async function keepCreating(t: TestApp, from: number, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.then(() => (done = true));
  const ids: number[] = [];
  for (let id = from; !done; id += 1) {
    await create(t, id);
    ids.push(id);
    await sleep(20);
  }
  return ids;
}

for (const database of DATABASES) {
  describe(`long requests re-check their token on ${database.kind}`, () => {
    const app = (context: TestContext) => buildTestApp(context, database.create, { TOKEN_CACHE_MS: String(CACHE_MS), FEED_HEARTBEAT_MS: '50' });

    for (const how of ['revoked', 'expired'] as const) {
      it(`ends an open event stream whose token is ${how}, with a last token-refused event and nothing after it`, async (context) => {
        const t = await app(context);
        const base = await listening(t);
        const token = await extraToken(t, 'watcher', how === 'expired' ? new Date(Date.now() + 1000) : null);
        const stream = await EventStreamClient.open(`${base}/plants/events`, { authorization: `Bearer ${token}` });
        context.after(() => stream.close());
        assert.equal(stream.status, 200);
        await stream.waitForComment();
        await create(t, 1);
        assert.equal((await stream.waitForEvents(1))[0]?.data, '{"id":1,"name":"plant 1"}');
        if (how === 'revoked') assert.equal(await t.store.tokens.revoke('watcher'), true);
        const created = await keepCreating(t, 2, stream.ended);
        const events = stream.events;
        const last = events.at(-1);
        assert.equal(last?.event, 'token-refused');
        const record = JSON.parse(last?.data ?? '') as { error: number; message: string };
        assert.equal(record.error, 401);
        assert.match(record.message, how === 'revoked' ? /invalid or revoked/ : /expired/);
        // The changes before the refusal, in order, each once; the rest of what was created never reached it.
        const delivered = events.slice(0, -1).map((event) => JSON.parse(event.data) as { id: number });
        assert.deepEqual(delivered.map(({ id }) => id), [1, ...created.slice(0, delivered.length - 1)]);
        assert.equal(last?.id, events.at(-2)?.id);
        // A new request with the token is refused as the last event said.
        const again = await EventStreamClient.open(`${base}/plants/events`, { authorization: `Bearer ${token}` });
        assert.equal(again.status, 401);
        await again.ended;
      });
    }

    for (const how of ['revoked', 'expired'] as const) {
      it(`ends a streamed bulk create whose token is ${how} with a last 401 line; no line after it is stored`, async (context) => {
        const t = await app(context);
        const base = await listening(t);
        const token = await extraToken(t, 'pusher', how === 'expired' ? new Date(Date.now() + 1000) : null);
        const request = openBulkCreate(base, token);
        context.after(() => request.destroy());
        const response = await new Promise<IncomingMessage>((resolve) => {
          request.once('response', resolve);
          request.write(`${plantJson('1', 'first')}\n`);
        });
        assert.equal(response.statusCode, 200);
        let body = '';
        response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        const ended = new Promise<void>((resolve) => response.once('end', resolve).once('close', resolve));
        while (!body.includes('\n')) await sleep(10);
        if (how === 'revoked') assert.equal(await t.store.tokens.revoke('pusher'), true);
        let sent = 1;
        for (let line = 2; ; line += 1) {
          const finished = await Promise.race([ended.then(() => true), sleep(20).then(() => false)]);
          if (finished || request.destroyed) break;
          request.write(`${plantJson(String(line), `line ${line}`)}\n`);
          sent = line;
        }
        const results = body.split('\n').filter((text) => text !== '').map((text) => JSON.parse(text) as { line: number; status: number; message?: string });
        const final = results.at(-1);
        assert.equal(final?.status, 401, body);
        assert.match(final?.message ?? '', how === 'revoked' ? /revoked.*lines from \d+ on were not read/ : /expired.*lines from \d+ on were not read/);
        // Every line before the final one is answered 200, in order, and stored; none from the final line's number on is.
        assert.deepEqual(results.slice(0, -1).map(({ line, status }) => [line, status]), results.slice(0, -1).map((_, index) => [index + 1, 200]));
        assert.equal(final?.line, results.length);
        for (let id = 1; id <= sent; id += 1) {
          const stored = await t.store.plants.get(BigInt(id));
          assert.equal(stored !== undefined, id < (final?.line ?? 0), `line ${id} of ${sent}`);
        }
      });
    }
  });
}
