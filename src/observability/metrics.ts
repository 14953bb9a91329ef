import { Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { TokenCacheObserver } from '../auth/authenticator.js';
import { feedCounts, registerFeedMetrics, type FeedCounts } from './feed-metrics.js';
import { processMetrics, renderAtMostEvery } from './metrics-render.js';
import { CellHistogram, type DurationCell } from './request-durations.js';
import { registerWebhookMetrics } from './webhook-metrics.js';
import type { CreateAnswer, PlantObserver } from '../plants/service.js';
import type { WriteQueue, WriteQueueObserver } from '../plants/write-queue.js';
import { STORAGE_ERROR_KINDS, type StorageErrorKind } from '../storage/errors.js';
import type { StorageObserver } from '../storage/observer.js';
import type { ConnectionPoolState, Store } from '../storage/store.js';
import type { WebhookStats } from '../webhooks/dispatcher.js';
import type { FeedObserver, StreamEnd } from '../feed/change-feed.js';

/**
 * Seconds, from a tenth of a millisecond to ten: prom-client's default buckets start at 5 ms, below which a create
 * answered from an idle store and one that waited for a busy commit would be counted alike.
 */
const DURATION_BUCKETS: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Rows per committed batch; the configured WRITE_BATCH_LIMIT is added as a bucket of its own, so full batches show. */
const BATCH_ROW_BUCKETS: readonly number[] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000];

const CREATE_ANSWERS: readonly CreateAnswer[] = ['created', 'replayed', 'conflict', 'refused'];

/** The `route` label of a request that matched no route: one fixed value, never the path a client chose. */
export const UNMATCHED_ROUTE = '(unmatched)';

/**
 * The `method` label of a request whose method no route of the app takes (PUT, PROPFIND, any of the thirty-odd
 * methods Node parses): one value, so that sending every method to every path adds a handful of series, not hundreds.
 */
const OTHER_METHOD = 'other';

/** Durations of one route's requests. Called once per request, so the label children are made once and kept. */
export interface RouteDurations {
  observe(method: string, statusCode: number, seconds: number): void;
}

/**
 * Every metric of one app, in a registry of its own (several apps in one process never collide), served by GET
 * /metrics together with the process's metrics. It and the modules beside it (./request-durations.ts,
 * ./metrics-render.ts, ./feed-metrics.ts, ./webhook-metrics.ts) are the modules that know prom-client: storage, the
 * write queue, the token cache and the plant service report to the observer interfaces they declare, implemented
 * here and wired in src/services.ts. On the request path: the creates are counted in plain numbers, handed
 * to prom-client when scraped (`collect`), and each request's duration goes to a cell of plain numbers made once per
 * route, method and status (./request-durations.ts), which prom-client reads when scraped. Gauges are read when
 * scraped, never kept up to date.
 */
export class Metrics implements PlantObserver, TokenCacheObserver, StorageObserver, WriteQueueObserver, FeedObserver {
  readonly #registry = new Registry();
  readonly #requestDurations: CellHistogram;
  readonly #creates: Record<CreateAnswer, number> = { created: 0, replayed: 0, conflict: 0, refused: 0 };
  readonly #commitBatchRows: Histogram;
  readonly #commitDuration: Histogram;
  readonly #storageErrors: Record<StorageErrorKind, Counter.Internal>;
  readonly #tokenCacheReloads: Record<'success' | 'failure', Counter.Internal>;
  readonly #authFailures: Record<'refused' | 'throttled', Counter.Internal>;
  #writeQueue: Pick<WriteQueue, 'depth'> | undefined;
  /** The change feed's streams, counted in plain numbers. */
  readonly #feed: FeedCounts = feedCounts();
  readonly #render: () => Promise<string>;

  /**
   * `render`, when given, is what GET /metrics answers instead of this app's metrics: in a worker thread, the whole
   * instance's, summed over its workers (src/workers/), each of which reports its own through `snapshot`. Either is
   * rendered at most once per `renderEveryMs` (METRICS_CACHE_MS; renderAtMostEvery).
   */
  constructor(options: { readonly batchLimit: number; readonly renderEveryMs?: number; readonly render?: () => Promise<string> }) {
    this.#render = renderAtMostEvery(options.renderEveryMs ?? 0, options.render ?? (() => Registry.merge([processMetrics(), this.#registry]).metrics()));
    const registers = [this.#registry];
    const creates = this.#creates;
    this.#requestDurations = new CellHistogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP requests by method, route (as in /openapi.json) and status code, from routing to the last byte written',
      buckets: DURATION_BUCKETS,
      registers,
    });
    new Counter({
      name: 'plantstore_creates_total',
      help: 'Creates (POST /plants with a valid body and token) by outcome: created, replayed (identical, 200), conflict (409), refused (nothing stored: write queue full or storage unavailable)',
      labelNames: ['outcome'],
      registers,
      collect() {
        this.reset();
        for (const answer of CREATE_ANSWERS) this.inc({ outcome: answer }, creates[answer]);
      },
    });
    registerFeedMetrics(registers, this.#feed);
    const queueDepth = () => this.#writeQueue?.depth ?? 0;
    new Gauge({
      name: 'plantstore_write_queue_depth',
      help: 'Writes waiting for storage (creates queued, deletes waiting or running): at WRITE_QUEUE_LIMIT new ones are refused with 503',
      registers,
      collect() {
        this.set(queueDepth());
      },
    });
    this.#commitBatchRows = new Histogram({
      name: 'plantstore_commit_batch_rows',
      help: 'Creates per batch the store committed (one transaction, one durable commit: group commit)',
      buckets: [...new Set([...BATCH_ROW_BUCKETS, options.batchLimit])].sort((a, b) => a - b),
      registers,
    });
    this.#commitDuration = new Histogram({
      name: 'plantstore_commit_duration_seconds',
      help: 'Time the store took to commit one batch of creates, waits for locks held elsewhere included',
      buckets: [...DURATION_BUCKETS],
      registers,
    });
    const storageErrors = new Counter({
      name: 'plantstore_storage_errors_total',
      help: 'Storage operations that failed, after any retries of their own, by kind: locked, disk_full, read_only, resources, io, connection, timeout, closed, other (not recognised: likely a bug)',
      labelNames: ['kind'],
      registers,
    });
    this.#storageErrors = childrenOf(storageErrors, STORAGE_ERROR_KINDS);
    const tokenCacheReloads = new Counter({
      name: 'plantstore_token_cache_reloads_total',
      help: 'Reloads of the valid tokens from storage (periodic, and on an unknown token), by result',
      labelNames: ['result'],
      registers,
    });
    this.#tokenCacheReloads = childrenOf(tokenCacheReloads, ['success', 'failure'] as const);
    const authFailures = new Counter({
      name: 'plantstore_auth_failures_total',
      help: 'Requests refused for their credentials (401, 403, or 400 for a malformed Authorization header), by outcome: refused (answered 401/403/400), throttled (answered 429: too many failures from the client address, AUTH_FAILURE_LIMIT)',
      labelNames: ['outcome'],
      registers,
    });
    this.#authFailures = childrenOf(authFailures, ['refused', 'throttled'] as const);
  }

  /** The Content-Type of `render()`'s text: the Prometheus text exposition format, 0.0.4. */
  get contentType(): string {
    return this.#registry.contentType;
  }

  /** Every metric, this app's and the process's, in the Prometheus text exposition format; at most METRICS_CACHE_MS old. */
  render(): Promise<string> {
    return this.#render();
  }

  /** Every metric, this app's and the process's (in a worker thread: the thread's), as values to aggregate. */
  snapshot(): Promise<Array<MetricObjectWithValues<MetricValue<string>>>> {
    return Registry.merge([processMetrics(), this.#registry]).getMetricsAsJSON();
  }

  /** The write queue whose depth is reported. */
  watchWriteQueue(writes: Pick<WriteQueue, 'depth'>): void {
    this.#writeQueue = writes;
  }

  /** Storage's failures are counted from now on, and its connection pool (PostgreSQL) reported when it has one. */
  watchStore(store: Pick<Store, 'observe' | 'connectionPoolState'>): void {
    store.observe?.(this);
    const poolState = store.connectionPoolState?.bind(store);
    if (poolState === undefined) return;
    const gauges: Array<[string, string, keyof ConnectionPoolState]> = [
      ['plantstore_postgres_pool_connections', 'PostgreSQL connections this instance holds open, idle or in use (at most PG_POOL_SIZE)', 'total'],
      ['plantstore_postgres_pool_idle_connections', 'PostgreSQL connections open and idle', 'idle'],
      ['plantstore_postgres_pool_waiting_queries', 'Queries waiting for a connection of the PostgreSQL pool', 'waiting'],
    ];
    for (const [name, help, field] of gauges) {
      new Gauge({
        name,
        help,
        registers: [this.#registry],
        collect() {
          this.set(poolState()[field]);
        },
      });
    }
  }

  /**
   * The webhook dispatcher's counts, read from its snapshot when scraped: events waiting (in the whole database),
   * attempts in flight on this instance, and this instance's attempts by outcome since it started.
   */
  watchWebhooks(stats: WebhookStats): void {
    registerWebhookMetrics([this.#registry], stats);
  }

  /**
   * The durations of one route's requests; `route` is its path as /openapi.json spells it, or UNMATCHED_ROUTE.
   * `methods` are the methods labelled as they are (those some route of the app takes); any other is OTHER_METHOD.
   * With the statuses the app answers a fixed set too, no request can add a series beyond what the app's routes
   * define, whatever its path or method.
   */
  route(route: string, methods: ReadonlySet<string>): RouteDurations {
    const histogram = this.#requestDurations;
    const byMethod = new Map<string, Map<number, DurationCell>>();
    return {
      observe(requestMethod, statusCode, seconds) {
        const method = methods.has(requestMethod) ? requestMethod : OTHER_METHOD;
        let byStatus = byMethod.get(method);
        if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
        let cell = byStatus.get(statusCode);
        if (cell === undefined) byStatus.set(statusCode, (cell = histogram.cell({ method, route, status_code: String(statusCode) })));
        cell.observe(seconds);
      },
    };
  }

  readonly streamOpened = (): void => {
    this.#feed.open += 1;
  };

  readonly streamClosed = (why: StreamEnd): void => {
    this.#feed.open -= 1;
    this.#feed.ended[why] += 1;
  };

  readonly eventsSent = (count: number): void => {
    this.#feed.events += count;
    this.#feed.writes += 1;
  };

  readonly resetSent = (): void => {
    this.#feed.resets += 1;
  };

  createAnswered(answer: CreateAnswer): void {
    this.#creates[answer] += 1;
  }

  batchCommitted(rows: number, seconds: number): void {
    this.#commitBatchRows.observe(rows);
    this.#commitDuration.observe(seconds);
  }

  storageFailed(kind: StorageErrorKind): void {
    this.#storageErrors[kind].inc();
  }

  tokenCacheReloaded(result: 'success' | 'failure'): void {
    this.#tokenCacheReloads[result].inc();
  }

  /** A request refused for its credentials: answered as such, or with 429 because its address failed too often. */
  authenticationFailed(outcome: 'refused' | 'throttled'): void {
    this.#authFailures[outcome].inc();
  }
}

/** A child per label value, each series shown from the start at 0, so a first increase is a rate, not a new series. */
function childrenOf<V extends string>(counter: Counter, values: readonly V[]): Record<V, Counter.Internal> {
  const children = {} as Record<V, Counter.Internal>;
  for (const value of values) {
    children[value] = counter.labels(value);
    children[value].inc(0);
  }
  return children;
}
