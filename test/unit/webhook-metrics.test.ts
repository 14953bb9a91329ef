/**
 * src/observability/webhook-metrics.ts: the webhook dispatcher's counts in GET /metrics' text, read from its snapshot
 * when scraped, so what the metrics say is what the dispatcher counted (the dispatcher's own counting is held by
 * test/http/webhooks.test.ts against real receivers). The metrics answered by the app are in
 * test/http/metrics.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metrics } from '../../src/observability/metrics.js';
import type { WebhookStatsSnapshot } from '../../src/webhooks/dispatcher.js';
import { parsePrometheusText, type Exposition } from '../helpers/prometheus.js';

describe('webhook metrics', () => {
  it('exposes the dispatcher snapshot as gauges and counters, moving as the snapshot moves', async () => {
    let snapshot: WebhookStatsSnapshot = { waiting: 7, inFlight: 2, delivered: 40, retried: 3, failed: 1, disabled: 0 };
    const metrics = new Metrics({ batchLimit: 500 });
    metrics.watchWebhooks({ snapshot: () => snapshot });
    const read = async () => parsePrometheusText(await metrics.render());
    const value = (text: Exposition, name: string, labels: Record<string, string> = {}) => {
      const found = text.value(name, labels);
      assert.notEqual(found, undefined, `${name} ${JSON.stringify(labels)} is exposed`);
      return found;
    };
    let text = await read();
    assert.equal(value(text, 'plantstore_webhook_events_waiting'), 7);
    assert.equal(value(text, 'plantstore_webhook_attempts_in_flight'), 2);
    assert.equal(value(text, 'plantstore_webhook_deliveries_total', { outcome: 'delivered' }), 40);
    assert.equal(value(text, 'plantstore_webhook_deliveries_total', { outcome: 'retried' }), 3);
    assert.equal(value(text, 'plantstore_webhook_deliveries_total', { outcome: 'failed' }), 1);
    assert.equal(value(text, 'plantstore_webhook_subscriptions_disabled_total'), 0);
    snapshot = { waiting: 0, inFlight: 0, delivered: 47, retried: 3, failed: 2, disabled: 1 };
    text = await read();
    assert.equal(value(text, 'plantstore_webhook_events_waiting'), 0);
    assert.equal(value(text, 'plantstore_webhook_deliveries_total', { outcome: 'delivered' }), 47);
    assert.equal(value(text, 'plantstore_webhook_deliveries_total', { outcome: 'failed' }), 2);
    assert.equal(value(text, 'plantstore_webhook_subscriptions_disabled_total'), 1);
  });
});
