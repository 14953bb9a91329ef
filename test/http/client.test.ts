/**
 * plantstore/client against the real app on each store, listening on 127.0.0.1: every method with the ids at the
 * edges of exactness (1, 2^53 + 1, both ends of int64), through create, get, list, delete, a bulk create, the change
 * feed and a webhook checked with verifyWebhook. Nothing here reads an id through a JSON number.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PlantStore, isConflict, verifyWebhook, type BulkResult, type Change, type StoredPlant } from '../../src/client/index.js';
import { generateEventIdPrefix, generateWebhookSecret } from '../../src/webhooks/signature.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASES } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { Receiver } from '../helpers/receiver.js';

stopPostgresAfterAll();

const IDS = [1n, 2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n];

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

for (const { kind, create: createDatabase } of DATABASES) {
  describe(`plantstore/client on ${kind}`, () => {
    let t: TestApp;
    let client: PlantStore;
    let receiver: Receiver;
    let secret: string;
    before(async () => {
      receiver = await Receiver.start();
      t = await startTestApp(createDatabase, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '30ms,30ms' });
      secret = generateWebhookSecret();
      await t.store.webhookSubscriptions.add({ name: 'client', url: receiver.url(), secret, idPrefix: generateEventIdPrefix(), createdAt: new Date() });
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      const { port } = t.app.server.address() as { port: number };
      client = new PlantStore({ url: `http://127.0.0.1:${port}`, token: t.token });
    });
    after(async () => {
      await t?.close();
      await receiver?.close();
    });

    it('creates, gets, lists and deletes every id exactly, and a 409 is a typed conflict', async () => {
      for (const id of IDS) assert.deepEqual(await client.create({ id, name: `p${id}`, tag: 'edge' }), { name: `p${id}`, tag: 'edge' });
      // An identical replay is the same answer; other content under the id is a conflict.
      assert.deepEqual(await client.create({ id: IDS[1] as bigint, name: `p${IDS[1]}`, tag: 'edge' }), { name: `p${IDS[1]}`, tag: 'edge' });
      await assert.rejects(client.create({ id: IDS[1] as bigint, name: 'other' }), (error) => isConflict(error) && error.status === 409 && error.error === 409);
      for (const id of IDS) assert.deepEqual(await client.get(id), { id, name: `p${id}`, tag: 'edge' });
      assert.equal(await client.get(2n ** 53n), undefined, '2^53 is another id, not found');
      // Pages of one plant: the iterator follows every Link.
      const listed = await collect(client.list({ tag: 'edge', limit: 1 }));
      assert.deepEqual(listed.map((plant) => plant.id), [...IDS].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      assert.deepEqual((await collect(client.list({ after: 1n, tag: 'edge' }))).map((plant) => plant.id), [2n ** 53n + 1n, 2n ** 63n - 1n]);
      for (const id of IDS) assert.equal(await client.delete(id), true);
      for (const id of IDS) assert.equal(await client.delete(id), false);
      assert.deepEqual(await collect(client.list({ tag: 'edge' })), []);
    });

    it('refuses a number id past 2^53 before sending it', async () => {
      await assert.rejects(client.create({ id: 2 ** 53 + 2, name: 'rounded' }), RangeError);
      await assert.rejects(client.get(2 ** 60), RangeError);
      await assert.rejects(client.create({ id: 2n ** 63n, name: 'past int64' }), RangeError);
      assert.deepEqual(await client.create({ id: 7, name: 'safe' }), { name: 'safe' });
      assert.equal(await client.delete(7), true);
    });

    it('createMany streams the plants and yields each line with its id, in order', async () => {
      async function* plants() {
        for (const id of IDS) yield { id, name: `bulk ${id}` };
        yield { id: IDS[0] as bigint, name: 'conflicting' };
      }
      const results: BulkResult[] = await collect(client.createMany(plants()));
      assert.deepEqual(
        results.map((result) => [result.line, result.id, result.status]),
        [...IDS.map((id, index) => [index + 1, id, 200]), [5, IDS[0], 409]],
      );
      for (const id of IDS) assert.deepEqual(await client.get(id), { id, name: `bulk ${id}` });
      // Batched as a browser sends it: the same results, lines numbered across the batches.
      const batched = await collect(client.createMany(IDS.map((id) => ({ id, name: `bulk ${id}` })), { stream: false, batchLines: 3 }));
      assert.deepEqual(batched.map((result) => [result.line, result.id, result.status, 'created' in result && result.created]), IDS.map((id, index) => [index + 1, id, 200, false]));
      for (const id of IDS) await client.delete(id);
      // A plant that cannot be sent exactly ends the stream with that error, whichever way it is sent.
      for (const stream of [true, false]) {
        await assert.rejects(collect(client.createMany([{ id: 21n, name: 'fine' }, { id: 2 ** 53 + 2, name: 'rounded' }], { stream })), RangeError);
      }
      await client.delete(21n);
    });

    it('watch yields every change after its cursor exactly, and stops on abort', async () => {
      // From 0, up to a change of this test's own: its sequence is the cursor.
      const seen: Change[] = [];
      await client.create({ id: 11, name: 'before' });
      await collectUntil(client.watch({ after: 0n }), seen, (changes) => changes.some((c) => c.type === 'plant.created' && c.plant.id === 11n));
      const cursor = seen.at(-1)?.sequence as bigint;
      const stop = new AbortController();
      const live: Change[] = [];
      const watching = collectUntil(client.watch({ after: cursor, signal: stop.signal }), live, (changes) => changes.length >= IDS.length * 2);
      for (const id of IDS) await client.create({ id, name: `w${id}` });
      for (const id of IDS) await client.delete(id);
      await watching;
      // An aborted watch ends its iteration without an error.
      const stopped = new AbortController();
      const ended = collect(client.watch({ signal: stopped.signal }));
      stopped.abort();
      assert.deepEqual(await ended, []);
      assert.deepEqual(
        live.map((change) => (change.type === 'plant.created' ? ['created', change.plant.id, change.plant.name] : change.type === 'plant.deleted' ? ['deleted', change.id] : ['reset'])),
        [...IDS.map((id) => ['created', id, `w${id}`]), ...IDS.map((id) => ['deleted', id])],
      );
      const sequences = live.map((change) => change.sequence);
      assert.ok(sequences.every((sequence, index) => index === 0 || sequence > (sequences[index - 1] as bigint)), 'in order');
      assert.ok((sequences[0] as bigint) > cursor, 'after the cursor');
      await client.delete(11);
    });

    it('verifyWebhook checks what the server sends and reads its id exactly; a changed body or an old timestamp throws', async () => {
      for (const id of IDS) await client.create({ id, name: `hook ${id}` });
      // Every create so far has its event; these are the ones of this test.
      const hooks = () => receiver.received.filter((request) => request.body.includes('"name":"hook '));
      await receiver.waitFor(() => hooks().length >= IDS.length);
      const plants: StoredPlant[] = [];
      for (const request of hooks()) {
        const event = await verifyWebhook({ headers: request.headers, body: request.body, secret });
        assert.equal(event.type, 'newPlant');
        plants.push(event.plant);
      }
      assert.deepEqual(plants.map((plant) => plant.id).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), [...IDS].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      const request = hooks()[0];
      assert.ok(request);
      await assert.rejects(verifyWebhook({ headers: request.headers, body: request.body.replace('hook', 'hoOk'), secret }), /no signature matches/);
      await assert.rejects(verifyWebhook({ headers: request.headers, body: new TextEncoder().encode(request.body), secret, now: Date.now() + 600_000 }), /too old/);
      await assert.rejects(verifyWebhook({ headers: request.headers, body: request.body, secret: generateWebhookSecret() }), /no signature matches/);
      for (const id of IDS) await client.delete(id);
    });
  });
}

/** Reads `iterable` into `into` until `done` holds over it, then stops iterating. */
async function collectUntil<T>(iterable: AsyncIterable<T>, into: T[], done: (items: readonly T[]) => boolean): Promise<void> {
  for await (const item of iterable) {
    into.push(item);
    if (done(into)) return;
  }
}
