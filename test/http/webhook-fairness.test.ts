/**
 * Webhook subscribers share the dispatcher's in-flight budget (WEBHOOK_MAX_IN_FLIGHT) in turn: four subscriptions
 * whose receiver accepts every request and never answers, created before a healthy one, hold no more than their
 * share, and the healthy one is delivered nearly every create while their attempts hang. Default settings but for
 * private networks (the receivers are on loopback); on each store.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateEventIdPrefix, generateWebhookSecret } from '../../src/webhooks/signature.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { DATABASES } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { Receiver } from '../helpers/receiver.js';

stopPostgresAfterAll();

const CREATES = 300;

async function subscribe(t: TestApp, name: string, url: string): Promise<void> {
  await t.store.webhookSubscriptions.add({ name, url, secret: generateWebhookSecret(), idPrefix: generateEventIdPrefix(), createdAt: new Date() });
}

for (const database of DATABASES) {
  describe(`webhook subscribers share the in-flight budget on ${database.kind}`, () => {
    it('delivers a healthy subscriber nearly every create while four created before it never answer', async (context) => {
      const t = await buildTestApp(context, database.create, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { webhookPollIntervalMs: 50 });
      const hanging = await Receiver.start(() => 'hang');
      const healthy = await Receiver.start();
      // Closed before the app (after() hooks run in reverse): the hanging attempts end with their connections.
      context.after(() => healthy.close());
      context.after(() => hanging.close());
      for (let index = 1; index <= 4; index += 1) await subscribe(t, `stalled-${index}`, hanging.url(`/stalled-${index}`));
      await subscribe(t, 'healthy', healthy.url());
      // The dispatcher reads the subscriptions at its next poll.
      await new Promise((resolve) => setTimeout(resolve, 200));
      for (let id = 1; id <= CREATES; id += 1) {
        const response = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: `{"id":${id},"name":"p${id}"}` });
        assert.equal(response.statusCode, 200, response.body);
      }
      // A generous deadline: with the four holding the whole budget in turn order this took far longer than it allows.
      await healthy.waitForCount(Math.ceil(CREATES * 0.95), 60_000);
      assert.ok(hanging.received.length > 0, 'the four were sent their events too');
    });
  });
}
