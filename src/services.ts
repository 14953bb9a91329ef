import type { Logger } from 'pino';
import { TokenAuthenticator } from './auth/authenticator.js';
import { noTokenMessage } from './auth/token-hint.js';
import type { Config } from './config/config.js';
import { Readiness } from './health/readiness.js';
import { Metrics } from './observability/metrics.js';
import { PlantService } from './plants/service.js';
import { WriteQueue, type WriteQueueObserver, type WriteQueueOptions } from './plants/write-queue.js';
import type { ServingStore, Store } from './storage/store.js';
import type { Resolver } from './webhooks/address-policy.js';
import { WebhookDispatcher } from './webhooks/dispatcher.js';
import { activeTracing, type Tracing } from './tracing/tracing.js';
import { ChangeFeed } from './feed/change-feed.js';
import { ChangePruner } from './feed/change-pruner.js';
import { changeEvent } from './feed/events.js';

/** The write queue's observer when tracing: the metrics' (if kept), and tracing told of every create queued. */
function tracedQueue(metrics: Metrics | null, tracing: Tracing): WriteQueueObserver {
  return {
    batchCommitted: (rows, seconds) => metrics?.batchCommitted(rows, seconds),
    queued: (plant) => tracing.queued(plant),
  };
}

/**
 * Everything the service does, without a transport, in two parts:
 *   - what a process has once (startProcessServices): the webhook dispatcher, the logging of storage's incidents,
 *     the start-up warnings, and the metrics registry of the thread that opened the store;
 *   - what each event loop has (startEventLoopServices): the write queue, the plant service, the token cache, readiness.
 * A single thread has both on one loop (startServices); an instance of several threads (src/workers/) has the first
 * and one loop on its main thread, and one loop in each worker thread. The HTTP app (src/app.ts) is built on an
 * event loop's Services; the entry (src/serve/server.ts) starts and closes them.
 */

/** What the HTTP app of one event loop is built on. It owns the write queue: it drains it in close(). */
export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly writes: WriteQueue;
  readonly plants: PlantService;
  readonly tokens: TokenAuthenticator;
  readonly readiness: Readiness;
  /** What GET /metrics serves; null when METRICS=off, and then nothing is counted. */
  readonly metrics: Metrics | null;
  /** This thread's tracing (src/tracing/), absent when it is off: the app traces requests with it. */
  readonly tracing?: Tracing;
  /** This loop's change feed: what its event streams (GET /plants/events) are handed, each change rendered once. */
  readonly feed: ChangeFeed;
  /**
   * Waits until every accepted write is answered, then stops the token cache (writing the last uses). The store
   * stays open: whoever opened it closes it.
   */
  close(): Promise<void>;
}

/** What an event loop's services are given besides the store. */
export interface EventLoopOptions {
  /** This loop's metrics (createMetrics), told of everything below; null when METRICS=off. */
  readonly metrics: Metrics | null;
  /** Called after a batch that created plants has committed: the webhook dispatcher, wherever it runs, looks for their events. */
  readonly onCreated: () => void;
  /** When this loop is one of an instance's threads (src/workers/topology.ts): what its write queue shares with theirs. */
  readonly instanceWrites?: InstanceWrites;
  /** The wall clock (Date.now) that token expiry is compared with; tests pass one they move by hand. */
  readonly wallClock?: () => number;
}

/**
 * What the write queue of one thread of an instance shares with the other threads': the instance's write bound and
 * latest refusal and, on the instance's writer, the gathering of the batches other threads are about to hand over.
 */
export type InstanceWrites = Pick<WriteQueueOptions, 'shared' | 'gathering'>;

/** Changes read per query by the feed and by each stream's backlog: bounded, so a stream's first page is too. */
const FEED_BATCH_SIZE = 500;

/**
 * The change feed's share of the event loop while commits keep coming, and the longest a change waits for it: with
 * many streams a read's writes take milliseconds, and one write per stream then carries every commit since, so the
 * fan-out's cost does not grow with the rate of commits (BENCHMARKS.md, "Change feed").
 */
const FEED_LOOP_SHARE = 0.2;
const FEED_MAX_READ_INTERVAL_MS = 50;

/** One event loop's services, on the narrow part of storage it uses. */
export async function startEventLoopServices(config: Config, store: ServingStore, log: Logger, options: EventLoopOptions): Promise<Services> {
  // Everything below reports to it: the store its failures, the queue its batches, the token cache its reloads, the
  // plant service each create's answer.
  const { metrics } = options;
  metrics?.watchStore(store);
  // Tracing (src/tracing/): each traced create's wait in the queue and the commit it joined are spans of its request,
  // and each statement a traced request runs (PostgreSQL) a span of its own, the tracer handed to the store as metrics are.
  const tracing = activeTracing();
  if (tracing) store.traceQueries?.(tracing);
  const writes = new WriteQueue(tracing ? tracing.traceCreates(store.plants, true) : store.plants, {
    queueLimit: config.writes.queueLimit,
    batchLimit: config.writes.batchLimit,
    concurrency: store.writeConcurrency,
    ...(store.commitPacing ? { pacing: store.commitPacing, postSyncHoldMs: config.writes.syncHoldMs } : {}),
    ...(tracing ? { observer: tracedQueue(metrics, tracing) } : metrics ? { observer: metrics } : {}),
    onCreated: options.onCreated,
    ...options.instanceWrites,
  });
  metrics?.watchWriteQueue(writes);
  const tokens = new TokenAuthenticator(store.tokens, { refreshMs: config.tokenCacheMs, log, observer: metrics ?? undefined, now: options.wallClock });
  await tokens.start();
  const feedLog = log.child({ component: 'feed' });
  const feed = new ChangeFeed(store.changes, {
    render: changeEvent,
    batchSize: FEED_BATCH_SIZE,
    pollMs: config.feed.pollMs,
    loopShare: FEED_LOOP_SHARE,
    maxIntervalMs: FEED_MAX_READ_INTERVAL_MS,
    onError: (error) => feedLog.warn({ err: error }, 'reading the change log failed; the next commit or poll tries again'),
  });
  let closing: Promise<void> | undefined;
  return {
    config,
    log,
    writes,
    plants: new PlantService(writes, store.plants, metrics ?? undefined),
    tokens,
    readiness: new Readiness(store, writes),
    metrics,
    ...(tracing ? { tracing } : {}),
    feed,
    close: () =>
      (closing ??= (async () => {
        feed.close();
        await writes.drain();
        await tokens.stop();
      })()),
  };
}

/** The metrics registry of one thread; null when METRICS=off. `render`: what GET /metrics answers instead (an instance's sum). */
export function createMetrics(config: Config, render?: () => Promise<string>): Metrics | null {
  return config.metrics ? new Metrics({ batchLimit: config.writes.batchLimit, renderEveryMs: config.metricsCacheMs, ...(render ? { render } : {}) }) : null;
}

/** Storage has no logger of its own: what it notices outside requests (a background thread dying) is logged here. Returns the stop. */
export function logIncidents(store: Pick<ServingStore, 'onIncident'>, log: Logger): () => void {
  return store.onIncident?.(({ level, message, error }) => log[level](error ? { err: error } : {}, message)) ?? (() => undefined);
}

/** What tests may change about how the process's services start. */
export interface ProcessOptions {
  /** How the webhook dispatcher resolves host names (the address check still runs on the address connected to). */
  readonly webhookResolver?: Resolver;
  readonly webhookPollIntervalMs?: number;
  readonly webhookPruneIntervalMs?: number;
}

/** What a process has once, on the store it opened. */
interface ProcessServices {
  /** The metrics of the thread that opened the store (the dispatcher's and the store's counts are in it); null when METRICS=off. */
  readonly metrics: Metrics | null;
  /** The one webhook dispatcher: woken after creates, its counts for metrics and tests. */
  readonly webhooks: WebhookDispatcher;
  /** Prunes the change log by FEED_RETENTION and FEED_RETENTION_COUNT. */
  readonly changePruner: ChangePruner;
  /** Stops the dispatcher (attempts in flight get half the shutdown timeout to finish) and the logging of storage's incidents. */
  close(): Promise<void>;
}

async function startProcessServices(
  config: Config,
  store: Store,
  log: Logger,
  options: ProcessOptions & Pick<MainLoopOptions, 'renderMetrics'> = {},
): Promise<ProcessServices> {
  const metrics = createMetrics(config, options.renderMetrics);
  const tracing = activeTracing();
  const stopHearingStorage = logIncidents(store, log);
  const dispatcher = new WebhookDispatcher(store.webhookOutbox, {
    config: config.webhooks,
    log: log.child({ component: 'webhooks' }),
    stopGraceMs: config.shutdownTimeoutMs / 2,
    ...(options.webhookResolver ? { resolve: options.webhookResolver } : {}),
    ...(options.webhookPollIntervalMs ? { pollIntervalMs: options.webhookPollIntervalMs } : {}),
    ...(options.webhookPruneIntervalMs ? { pruneIntervalMs: options.webhookPruneIntervalMs } : {}),
    ...(tracing ? { tracer: tracing } : {}),
  });
  try {
    // Only one process dispatches from a SQLite file: leases a killed predecessor held are void.
    await dispatcher.start(store.kind === 'sqlite');
    metrics?.watchWebhooks(dispatcher);
    if ((await store.tokens.list()).length === 0) {
      process.stderr.write(noTokenMessage(config.database, process.argv[1], process.cwd()));
    }
  } catch (error) {
    await dispatcher.stop();
    stopHearingStorage();
    throw error;
  }
  const changePruner = new ChangePruner(store.changes, { maxAgeMs: config.feed.retentionMs, maxCount: config.feed.retentionCount }, log.child({ component: 'feed' }));
  changePruner.start();
  let closing: Promise<void> | undefined;
  return {
    metrics,
    webhooks: dispatcher,
    changePruner,
    close: () =>
      (closing ??= (async () => {
        changePruner.stop();
        await dispatcher.stop();
        stopHearingStorage();
      })()),
  };
}

/** One event loop of a process that has the store to itself or is an instance's main thread, and the process's services. */
export interface MainServices extends Services {
  readonly webhooks: WebhookDispatcher;
}

/**
 * What the main thread's event loop adds: as EventLoopOptions, less what startServices decides, and as an instance's
 * main thread (src/workers/), the instance's GET /metrics.
 */
export interface MainLoopOptions extends Partial<Pick<EventLoopOptions, 'instanceWrites' | 'wallClock'>> {
  /** What GET /metrics answers instead of this thread's metrics: an instance's, summed over its threads. */
  readonly renderMetrics?: () => Promise<string>;
}

/**
 * The process's services and its main thread's event loop on the store it opened: all of a single thread's, and an
 * instance's main thread's (the instance's writer). close() drains the loop, then stops the process's services.
 */
export async function startServices(config: Config, store: Store, log: Logger, options: ProcessOptions & MainLoopOptions = {}): Promise<MainServices> {
  const shared = await startProcessServices(config, store, log, options);
  let loop: Services;
  try {
    loop = await startEventLoopServices(config, store, log, {
      metrics: shared.metrics,
      onCreated: () => shared.webhooks.wake(),
      ...(options.instanceWrites ? { instanceWrites: options.instanceWrites } : {}),
      ...(options.wallClock ? { wallClock: options.wallClock } : {}),
    });
  } catch (error) {
    await shared.close();
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    ...loop,
    webhooks: shared.webhooks,
    close: () =>
      (closing ??= (async () => {
        await loop.close();
        await shared.close();
      })()),
  };
}
