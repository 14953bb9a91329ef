import type { Logger } from 'pino';
import { TokenAuthenticator } from './auth/authenticator.js';
import type { Config } from './config.js';
import { Readiness } from './health/readiness.js';
import { Metrics } from './metrics.js';
import { PlantService } from './plants/service.js';
import { WriteQueue, type SharedWriteState } from './plants/write-queue.js';
import type { Store } from './storage/store.js';
import type { Resolver } from './webhooks/address-policy.js';
import { WebhookDispatcher, type WebhookStats } from './webhooks/dispatcher.js';

/**
 * Everything the service does, without a transport: the HTTP app (src/app.ts) is built on it, the entry
 * (src/server.ts) starts and closes it. It is the one owner of the write queue: it creates it here and drains it in
 * close(), before whoever opened the store closes that.
 */
export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly store: Store;
  readonly writes: WriteQueue;
  readonly plants: PlantService;
  readonly tokens: TokenAuthenticator;
  readonly readiness: Readiness;
  /** What GET /metrics serves; null when METRICS=off, and then nothing is counted. */
  readonly metrics: Metrics | null;
  /** The webhook dispatcher's counts, for metrics. */
  readonly webhooks: WebhookStats & { prune(): Promise<number> };
  /**
   * Waits until every accepted write is answered, stops the webhook dispatcher (attempts in flight get half the
   * shutdown timeout to finish), stops the token cache (writing the last uses) and stops logging storage's incidents.
   * The store stays open: whoever opened it closes it.
   */
  close(): Promise<void>;
}

/** What tests may change about how services start. */
export interface ServiceOptions {
  /** How the webhook dispatcher resolves host names (the address check still runs on the address connected to). */
  readonly webhookResolver?: Resolver;
  readonly webhookPollIntervalMs?: number;
  readonly webhookPruneIntervalMs?: number;
  /** Set when these services are one worker thread of an instance of several (src/workers/). */
  readonly worker?: WorkerRole;
  /** The wall clock (Date.now) that token expiry is compared with; tests pass one they move by hand. */
  readonly wallClock?: () => number;
}

/**
 * What a worker thread's services share with the rest of its instance: the write bound and refusal memory of every
 * worker's queue, the instance's one webhook dispatcher (running elsewhere, told of created plants through
 * `wakeWebhooks`), and GET /metrics answering for the whole instance.
 */
export interface WorkerRole {
  readonly writes: SharedWriteState;
  readonly wakeWebhooks: () => void;
  readonly renderMetrics: () => Promise<string>;
}

const NO_WEBHOOK_STATS: WebhookStats & { prune(): Promise<number> } = {
  snapshot: () => ({ waiting: 0, inFlight: 0, delivered: 0, retried: 0, failed: 0, disabled: 0 }),
  prune: () => Promise.resolve(0),
};

export async function startServices(config: Config, store: Store, log: Logger, options: ServiceOptions = {}): Promise<Services> {
  // Everything below reports to it: the store its failures, the queue its batches, the token cache its reloads, the
  // plant service each create's answer, the webhook dispatcher its deliveries.
  const { worker } = options;
  const metrics = config.metrics
    ? new Metrics({ batchLimit: config.writes.batchLimit, renderEveryMs: config.metricsCacheMs, ...(worker ? { render: worker.renderMetrics } : {}) })
    : null;
  if (metrics) metrics.watchStore(store);
  // A worker thread sends no webhooks: its instance has one dispatcher, so each event is sent once per attempt.
  const dispatcher = worker ? null : new WebhookDispatcher(store.webhooks, {
    config: config.webhooks,
    log: log.child({ component: 'webhooks' }),
    stopGraceMs: config.shutdownTimeoutMs / 2,
    ...(options.webhookResolver ? { resolve: options.webhookResolver } : {}),
    ...(options.webhookPollIntervalMs ? { pollIntervalMs: options.webhookPollIntervalMs } : {}),
    ...(options.webhookPruneIntervalMs ? { pruneIntervalMs: options.webhookPruneIntervalMs } : {}),
  });
  const writes = new WriteQueue(store.plants, {
    queueLimit: config.writes.queueLimit,
    batchLimit: config.writes.batchLimit,
    concurrency: store.writeConcurrency,
    ...(metrics ? { observer: metrics } : {}),
    onCreated: worker ? worker.wakeWebhooks : () => dispatcher?.wake(),
    ...(worker ? { shared: worker.writes } : {}),
  });
  metrics?.watchWriteQueue(writes);
  if (dispatcher) metrics?.watchWebhooks(dispatcher);
  // Storage has no logger of its own; what it notices outside requests (a background thread dying) is logged here.
  const stopHearingStorage = store.onIncident(({ level, message, error }) => log[level](error ? { err: error } : {}, message));
  const tokens = new TokenAuthenticator(store.tokens, { refreshMs: config.tokenCacheMs, log, observer: metrics ?? undefined, now: options.wallClock });
  try {
    await tokens.start();
  } catch (error) {
    stopHearingStorage();
    throw error;
  }
  try {
    // Only one process dispatches from a SQLite file: leases a killed predecessor held are void.
    await dispatcher?.start(store.kind === 'sqlite');
  } catch (error) {
    await dispatcher?.stop();
    await tokens.stop();
    stopHearingStorage();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    config,
    log,
    store,
    writes,
    plants: new PlantService(writes, store.plants, metrics ?? undefined),
    tokens,
    readiness: new Readiness(store, writes),
    metrics,
    webhooks: dispatcher ?? NO_WEBHOOK_STATS,
    close: () =>
      (closing ??= (async () => {
        await writes.drain();
        await dispatcher?.stop();
        await tokens.stop();
        stopHearingStorage();
      })()),
  };
}
