import type { WebhookConfig } from '../config/config.js';
import type { Resolver } from './address-policy.js';
import type { DeliveryTracer } from './send-event.js';

/** The few log methods the dispatcher uses (a pino logger has them). */
export interface WebhookLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

/** What the dispatcher (src/webhooks/dispatcher.ts) is given. */
export interface DispatcherOptions {
  readonly config: WebhookConfig;
  readonly log: WebhookLog;
  /** How long stop() lets attempts in flight finish before cutting them short and releasing them. */
  readonly stopGraceMs: number;
  /** Tests resolve names their own way; the check still runs on the address connected to. */
  readonly resolve?: Resolver;
  /** In [0, 1): the jitter of retry delays. */
  readonly random?: () => number;
  /** How often subscriptions are re-read (changes by the CLI or another replica) and due events looked for. */
  readonly pollIntervalMs?: number;
  readonly pruneIntervalMs?: number;
  /** Tracing (src/tracing/), when on: each attempt a span in the trace of the create that wrote its event. */
  readonly tracer?: DeliveryTracer;
}
