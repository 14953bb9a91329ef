/**
 * An instance of WORKERS threads in one process (docs/design/workers.md): the main thread serves HTTP as a single
 * thread does (src/serve/server.ts starts it, with this module beside it when its topology, ./topology.ts, says so),
 * and WORKERS − 1 worker threads beside it each run the whole HTTP app on their own event loop. Every thread listens on the one PORT with SO_REUSEPORT, so the kernel
 * spreads connections over them. The main thread also holds what the instance has once:
 *
 *   - On SQLite, the one write connection and its group commit: the main thread's own WriteQueue is the writer, and
 *     every worker hands each batch of creates over in one message (WriteQueue.createBatch); batches that arrive
 *     during a commit join the next one with the main thread's own creates. Its own creates cross no thread.
 *   - The webhook dispatcher, so each event is sent once per attempt however many threads there are.
 *   - GET /metrics for the instance: every thread's, summed (./instance-metrics.ts).
 *   - The supervision of the workers (./worker-pool.ts): a worker that ends unexpectedly is logged and replaced.
 *   - With TLS, the certificate and key, read once and handed to every worker.
 *
 * What the threads share without a message per request (the write bound, the latest refusal, rate-limit buckets) is
 * in shared memory (./shared-memory.ts); the main thread is slot 0 there, the workers 1 to WORKERS − 1.
 */
import type { Logger } from 'pino';
import { renderAtMostEvery } from '../observability/metrics-render.js';
import type { Config } from '../config/config.js';
import type { TlsCredentials } from '../http/tls.js';
import type { MainLoopOptions, MainServices } from '../services.js';
import type { Store } from '../storage/store.js';
import { SqliteStore } from '../storage/sqlite/sqlite-store.js';
import { aggregateInstanceMetrics, type ThreadMetrics } from './instance-metrics.js';
import type { MainOperations } from './protocol.js';
import type { Handlers } from './rpc.js';
import type { MainTopology } from './topology.js';
import { packOutcomes, unpackPlants, unpackTraceparents } from './wire.js';
import { WorkerPool } from './worker-pool.js';

/**
 * What the thread the entry runs in serves beside itself: nothing when alone (src/serve/server.ts ALONE), its worker
 * threads as an instance's main thread (InstanceMain, loaded only then).
 */
export interface ThreadsBeside {
  /** What the main thread's services take from it: GET /metrics answering the instance's. */
  readonly loopOptions: Pick<MainLoopOptions, 'renderMetrics'>;
  /** The worker threads; undefined alone. */
  readonly pool: WorkerPool | undefined;
  /** Starts them on the thread's services (while it builds its app); resolves once every one listens. */
  start(services: MainServices, log: Logger, tls: TlsCredentials | undefined): Promise<void>;
  /** The thread listens too, at `url`. */
  listening(url: string, log: Logger): void;
  /** SIGHUP's reload: every one serves new connections with `credentials`. */
  useCertificate(credentials: TlsCredentials): Promise<void>;
  /** Drains each one started so far, beside the thread's app (./close-thread.ts); undefined alone. */
  readonly drain: (() => Promise<void>) | undefined;
}

/** What the main thread of an instance adds to a single thread: its worker threads and what it holds for them. */
export class InstanceMain implements ThreadsBeside {
  readonly #config: Config;
  readonly #topology: MainTopology;
  readonly #store: Store;
  #pool: WorkerPool | undefined;
  #stopTellingChanges: (() => void) | undefined;
  #services: MainServices | undefined;
  #cachedMetrics: (() => Promise<string>) | undefined;

  constructor(config: Config, topology: MainTopology, store: Store) {
    this.#config = config;
    this.#topology = topology;
    this.#store = store;
  }

  /** GET /metrics in the main thread answers the instance's. */
  get loopOptions(): Pick<MainLoopOptions, 'renderMetrics'> {
    return { renderMetrics: () => this.#renderMetrics() };
  }

  get pool(): WorkerPool | undefined {
    return this.#pool;
  }

  /**
   * Starts the WORKERS − 1 worker threads on the main thread's services; resolves once every one listens, rejects
   * with the first failure (drain then stops what started).
   */
  async start(services: MainServices, log: Logger, tls: TlsCredentials | undefined): Promise<void> {
    const store = this.#store;
    this.#services = services;
    const pool = new WorkerPool({
      config: this.#config,
      instance: this.#topology.instance,
      durableMark: store.durableMark,
      log,
      tls,
      onCreated: () => services.webhooks.wake(),
      handlers: (_pool, slot) => this.#handlers(services, slot),
    });
    this.#pool = pool;
    await pool.start();
    // The feed's wake-up on SQLite: the main thread commits every write, so it tells each worker's change feed.
    // (On PostgreSQL each thread's store LISTENs for itself.)
    if (store instanceof SqliteStore) {
      const changes = store.changes;
      this.#stopTellingChanges = changes.onCommitted(() => pool.broadcast({ kind: 'changes', durableThrough: changes.durableThrough }));
    }
  }

  /** Once the main thread listens too: it alone logs what the instance serves. */
  listening(url: string, log: Logger): void {
    log.info({ workers: this.#config.workers, url }, 'every worker thread listens');
  }

  async useCertificate(credentials: TlsCredentials): Promise<void> {
    await this.#pool?.useCertificate(credentials);
  }

  /** Drains every worker started so far (a start that failed part-way included). */
  readonly drain = async (): Promise<void> => {
    this.#stopTellingChanges?.();
    await this.#pool?.stop();
  };

  /** What the main thread answers the worker in `slot`: on SQLite every write, and GET /metrics for the instance. */
  #handlers(services: MainServices, slot: number): Handlers<MainOperations> {
    const store = this.#store;
    return {
      create: async (packed) => packOutcomes(await services.writes.createBatch(unpackPlants(packed), slot, unpackTraceparents(packed))),
      delete: (id) => store.plants.delete(id),
      recordTokenUse: (uses) => store.tokens.recordUse(uses),
      checkWritable: () => store.checkWritable(),
      metrics: () => this.#renderMetrics(),
    };
  }

  /**
   * The instance's metrics, gathered at most once per METRICS_CACHE_MS however many threads ask: every worker's
   * scrape comes here, so a cache in each worker alone would still let N scrapers make the main thread gather N times.
   */
  #renderMetrics(): Promise<string> {
    this.#cachedMetrics ??= renderAtMostEvery(this.#config.metricsCacheMs, () => this.#gatherMetrics());
    return this.#cachedMetrics();
  }

  async #gatherMetrics(): Promise<string> {
    const own = this.#services?.metrics;
    const threads: ThreadMetrics[] = [{ thread: 'main', metrics: own ? await own.snapshot() : [] }];
    for (const { slot, metrics } of (await this.#pool?.metrics()) ?? []) threads.push({ thread: slot, metrics });
    return aggregateInstanceMetrics(threads, this.#store.kind === 'sqlite').metrics();
  }
}
