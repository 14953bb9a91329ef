import { Counter, Gauge, type Registry } from 'prom-client';
import type { WebhookStats } from '../webhooks/dispatcher.js';

/**
 * The webhook dispatcher's families, read from its snapshot when scraped: events waiting (in the whole database),
 * attempts in flight on this instance, and this instance's attempts by outcome since it started.
 */
export function registerWebhookMetrics(registers: Registry[], stats: WebhookStats): void {
  new Gauge({
    name: 'plantstore_webhook_events_waiting',
    help: 'Webhook events of active subscriptions waiting for an attempt, in the whole database (refreshed every few seconds)',
    registers,
    collect() {
      this.set(stats.snapshot().waiting);
    },
  });
  new Gauge({
    name: 'plantstore_webhook_attempts_in_flight',
    help: 'Webhook attempts this instance has in flight now',
    registers,
    collect() {
      this.set(stats.snapshot().inFlight);
    },
  });
  new Counter({
    name: 'plantstore_webhook_deliveries_total',
    help: 'Webhook attempts of this instance by outcome: delivered (2xx), retried (failed, another attempt is due), failed (the schedule spent: given up)',
    labelNames: ['outcome'],
    registers,
    collect() {
      const snapshot = stats.snapshot();
      this.reset();
      for (const outcome of ['delivered', 'retried', 'failed'] as const) this.labels(outcome).inc(snapshot[outcome]);
    },
  });
  new Counter({
    name: 'plantstore_webhook_subscriptions_disabled_total',
    help: 'Webhook subscriptions this instance disabled: 410 Gone, or a whole retry schedule spent without a success',
    registers,
    collect() {
      this.reset();
      this.inc(stats.snapshot().disabled);
    },
  });
}
