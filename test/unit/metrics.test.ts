/**
 * src/observability/metrics.ts: the webhook dispatcher's counts in GET /metrics' text, read from its snapshot when
 * scraped, so what the metrics say is what the dispatcher counted (the dispatcher's own counting is held by
 * test/http/webhooks.test.ts against real receivers); and renderAtMostEvery, which renders the text at most once per
 * interval however often it is scraped. The metrics answered by the app are in test/http/metrics.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metrics, renderAtMostEvery } from '../../src/observability/metrics.js';
import type { WebhookStatsSnapshot } from '../../src/webhooks/dispatcher.js';
import { FakeClock } from '../helpers/clock.js';
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

describe('renderAtMostEvery', () => {
  it('renders once per interval however often it is asked, concurrent asks sharing the one in flight', async () => {
    const clock = new FakeClock();
    let renders = 0;
    const render = renderAtMostEvery(1000, async () => `text ${(renders += 1)}`, clock.now);
    assert.deepEqual(await Promise.all([render(), render(), render()]), ['text 1', 'text 1', 'text 1']);
    clock.advance(999);
    assert.equal(await render(), 'text 1');
    clock.advance(1);
    assert.equal(await render(), 'text 2');
    assert.equal(renders, 2);
  });

  it('keeps no failure: the next ask renders again', async () => {
    const clock = new FakeClock();
    let calls = 0;
    const render = renderAtMostEvery(1000, async () => {
      calls += 1;
      if (calls === 1) throw new Error('gathering failed');
      return 'text';
    }, clock.now);
    await assert.rejects(render(), /gathering failed/);
    assert.equal(await render(), 'text');
  });

  it('renders every time with an interval of 0', async () => {
    let renders = 0;
    const render = renderAtMostEvery(0, async () => String((renders += 1)));
    assert.deepEqual([await render(), await render()], ['1', '2']);
  });
});
