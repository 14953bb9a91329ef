/**
 * An instance of WORKERS threads in one process (docs/design/workers.md): the main thread serves HTTP as a single
 * thread does (src/serve/server.ts starts it with what this module adds), and WORKERS − 1 worker threads beside it each run
 * the whole HTTP app on their own event loop. Every thread listens on the one PORT with SO_REUSEPORT, so the kernel
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
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AppOptions } from '../app.js';
import { renderAtMostEvery } from '../observability/metrics.js';
import type { Config } from '../config/config.js';
import type { TlsCredentials } from '../http/tls.js';
import type { Gathering } from '../plants/write-queue.js';
import type { MainLoopOptions, MainServices } from '../services.js';
import type { Store } from '../storage/store.js';
import { SqliteStore } from '../storage/sqlite/sqlite-store.js';
import { aggregateInstanceMetrics, type ThreadMetrics } from './instance-metrics.js';
import type { MainOperations } from './protocol.js';
import type { Handlers } from './rpc.js';
import { MAIN_SLOT, SharedBucketCells, SharedWrites, createInstanceMemory, sharedClock, writesComing, type InstanceMemory } from './shared-memory.js';
import { packOutcomes, unpackPlants, unpackTraceparents } from './wire.js';
import { WorkerPool } from './worker-pool.js';

/**
 * The longest the writer holds a commit for a batch another thread is about to hand over (WriteQueue's Gathering):
 * about one commit's fsync, so a held commit costs a create at most what waiting for the next would.
 */
const GATHER_MAX_WAIT_MS = 1;

/** What the main thread of an instance adds to a single thread, before its services start and once they listen. */
export class InstanceMain {
  /** The port every thread listens on (PORT, or the one chosen for PORT=0), checked free. */
  readonly port: number;
  readonly #config: Config;
  readonly #memory: InstanceMemory;
  #pool: WorkerPool | undefined;
  #stopTellingChanges: (() => void) | undefined;
  #services: MainServices | undefined;
  #cachedMetrics: (() => Promise<string>) | undefined;

  private constructor(config: Config, port: number) {
    this.#config = config;
    this.port = port;
    this.#memory = createInstanceMemory(config.workers);
  }

  /** Claims the port (see claimPort) and makes the shared memory. */
  static async claim(config: Config): Promise<InstanceMain> {
    return new InstanceMain(config, await claimPort(config.host, config.port));
  }

  /** The main thread's event loop: slot 0 of the shared write bound and, on SQLite, the writer that gathers. */
  loopOptions(kind: Store['kind']): MainLoopOptions & { renderMetrics: () => Promise<string> } {
    const gathering: Gathering = { ownSource: MAIN_SLOT, maxWaitMs: GATHER_MAX_WAIT_MS, coming: writesComing(this.#memory) };
    return {
      sharedWrites: new SharedWrites(this.#memory, MAIN_SLOT, this.#config.writes.queueLimit),
      // On PostgreSQL each thread commits its own: nothing is handed over, so nothing to wait for.
      ...(kind === 'sqlite' ? { gathering } : {}),
      renderMetrics: () => this.#renderMetrics(kind),
    };
  }

  /** The main thread's app: the shared clock and token buckets. */
  appOptions(): Pick<AppOptions, 'now' | 'rateLimitCells'> {
    return { now: sharedClock(this.#memory), rateLimitCells: new SharedBucketCells(this.#memory) };
  }

  /**
   * Starts the WORKERS − 1 worker threads on the main thread's services; resolves once every one listens, rejects
   * with the first failure (stopWorkers then stops what started).
   */
  async startWorkers(store: Store, services: MainServices, log: Logger, tls: TlsCredentials | undefined): Promise<WorkerPool> {
    this.#services = services;
    const pool = new WorkerPool({
      config: this.#config,
      port: this.port,
      memory: this.#memory,
      durableMark: store.durableMark,
      log,
      tls,
      onCreated: () => services.webhooks.wake(),
      handlers: (_pool, slot) => this.#handlers(store, services, slot),
    });
    this.#pool = pool;
    await pool.start();
    // The feed's wake-up on SQLite: the main thread commits every write, so it tells each worker's change feed.
    // (On PostgreSQL each thread's store LISTENs for itself.)
    if (store instanceof SqliteStore) {
      const changes = store.changes;
      this.#stopTellingChanges = changes.onCommitted(() => pool.broadcast({ kind: 'changes', durableThrough: changes.durableThrough }));
    }
    return pool;
  }

  /** Drains every worker started so far (a start that failed part-way included). */
  async stopWorkers(): Promise<void> {
    this.#stopTellingChanges?.();
    await this.#pool?.stop();
  }

  /** What the main thread answers the worker in `slot`: on SQLite every write, and GET /metrics for the instance. */
  #handlers(store: Store, services: MainServices, slot: number): Handlers<MainOperations> {
    return {
      create: async (packed) => packOutcomes(await services.writes.createBatch(unpackPlants(packed), slot, unpackTraceparents(packed))),
      delete: (id) => store.plants.delete(id),
      recordTokenUse: (uses) => store.tokens.recordUse(uses),
      checkWritable: () => store.checkWritable(),
      metrics: () => this.#renderMetrics(store.kind),
    };
  }

  /**
   * The instance's metrics, gathered at most once per METRICS_CACHE_MS however many threads ask: every worker's
   * scrape comes here, so a cache in each worker alone would still let N scrapers make the main thread gather N times.
   */
  #renderMetrics(kind: Store['kind']): Promise<string> {
    this.#cachedMetrics ??= renderAtMostEvery(this.#config.metricsCacheMs, () => this.#gatherMetrics(kind));
    return this.#cachedMetrics();
  }

  async #gatherMetrics(kind: Store['kind']): Promise<string> {
    const own = this.#services?.metrics;
    const threads: ThreadMetrics[] = [{ thread: 'main', metrics: own ? await own.snapshot() : [] }];
    for (const { slot, metrics } of (await this.#pool?.metrics()) ?? []) threads.push({ thread: slot, metrics });
    return aggregateInstanceMetrics(threads, kind === 'sqlite').metrics();
  }
}

/**
 * The port the threads will share, checked free first: another process listening on it (a second instance
 * included, which SO_REUSEPORT would otherwise join) makes the start fail as a single process's does. PORT=0
 * picks a free port here, for every thread.
 */
async function claimPort(host: string, port: number): Promise<number> {
  const probe = createServer();
  probe.listen({ host, port });
  await Promise.race([once(probe, 'listening'), once(probe, 'error').then(([error]) => Promise.reject(error as Error))]);
  const chosen = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return chosen;
}
