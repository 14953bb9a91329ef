/**
 * An instance of WORKERS worker threads in one process (docs/design.md, "Workers"). Each worker runs the whole HTTP
 * app on its own event loop and listens on the one PORT with SO_REUSEPORT, so the kernel spreads connections over
 * them. The main thread serves no request: it holds what the instance has once.
 *
 *   - On SQLite, the one write connection and its group commit (./batch-writer.ts): every worker hands each batch of
 *     creates over in one message, and batches from every worker that arrive during one commit join the next.
 *   - The webhook dispatcher, so each event is sent once per attempt however many workers there are.
 *   - GET /metrics for the instance: a worker asked for it asks the main thread, which sums every thread's.
 *   - The supervision of the workers: a worker that ends unexpectedly is logged and replaced; close() drains every
 *     worker, then closes storage. Threads end with the process, so a SIGKILL leaves no worker behind.
 *   - With TLS, the certificate and key: read once here, at start and on each reload (SIGHUP), and handed to every
 *     worker, so every listening socket serves the same pair and a replacement worker starts with the latest one.
 *
 * What the workers share without a message per request (the write bound, the latest refusal, rate-limit buckets) is
 * in shared memory (./shared-memory.ts).
 */
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { certificateReloader, readTlsCredentials, type TlsCredentials } from '../http/tls.js';
import { createLogger } from '../log.js';
import { Metrics } from '../metrics.js';
import { openStore, type OpenOptions } from '../storage/open.js';
import type { Store } from '../storage/store.js';
import type { Resolver } from '../webhooks/address-policy.js';
import { WebhookDispatcher } from '../webhooks/dispatcher.js';
import { BatchWriter } from './batch-writer.js';
import { aggregateInstanceMetrics, type ThreadMetrics } from './instance-metrics.js';
import type { MainOperations, MetricsSnapshot, WorkerData, WorkerNotice, WorkerOperations } from './protocol.js';
import { Endpoint, type Handlers } from './rpc.js';
import { createInstanceMemory, forgetWorker, writesComing, type InstanceMemory } from './shared-memory.js';
import { packOutcomes, unpackPlants } from './wire.js';

const WORKER_SCRIPT = new URL('./worker-thread.js', import.meta.url);

/**
 * PostgreSQL connections the main thread keeps for the dispatcher (each worker has PG_POOL_SIZE of its own): its
 * round trips are one at a time, and a second connection lets a count or a prune run beside them.
 */
const MAIN_POOL_SIZE = 2;

/**
 * The longest the writer holds a commit for a batch another worker is about to hand over (./batch-writer.ts,
 * Gathering): about one commit's fsync, so a held commit costs a create at most what waiting for the next would.
 */
const GATHER_MAX_WAIT_MS = 1;

/** A replacement starts at once; one that fails to start, or dies soon after, waits this long, doubling. */
const REPLACE_DELAY_MS = 500;
const REPLACE_DELAY_MAX_MS = 30_000;
/** A worker that has served this long before dying is replaced at once again: its death was not a start-up loop. */
const STABLE_AFTER_MS = 10_000;
/** A drained worker's thread ends by itself; if some handle keeps it, it is terminated after this. */
const DRAINED_EXIT_GRACE_MS = 1000;
/** GET /metrics leaves out a worker that has not answered within this (one stuck in a long task): better partial than none. */
const WORKER_METRICS_WAIT_MS = 2000;

export interface RunningInstance {
  /** The address every worker listens on, e.g. http://127.0.0.1:8080 */
  readonly url: string;
  readonly log: Logger;
  readonly workers: WorkerPool;
  /** SIGHUP: re-reads TLS_CERT_FILE and TLS_KEY_FILE and has every worker serve new connections with them. */
  reloadCertificate(): Promise<void>;
  /** Drains every worker (each stops accepting, answers what is in flight, closes), then closes storage; once. */
  close(): Promise<void>;
}

/** What tests may change about how an instance starts. */
export interface InstanceOptions {
  /** The main thread's logger (workers log to stdout). */
  readonly log?: Logger;
  readonly webhookResolver?: Resolver;
  readonly webhookPollIntervalMs?: number;
  /** How the main thread opens storage (src/storage/open.ts): the command's say on creating a SQLite database. */
  readonly open?: OpenOptions;
}

/** Opens storage, starts the main thread's part, then every worker; resolves once every worker listens. */
export async function startInstance(config: Config, options: InstanceOptions = {}): Promise<RunningInstance> {
  const log = options.log ?? createLogger(config);
  // Before storage is opened: a certificate or key that cannot be used fails the start with nothing to close.
  const tls = config.tls ? await readTlsCredentials(config.tls) : undefined;
  const { database } = config;
  const store = await openStore(database.kind === 'postgres' ? { ...database, poolSize: Math.min(database.poolSize, MAIN_POOL_SIZE) } : database, options.open);
  const metrics = config.metrics ? new Metrics({ batchLimit: config.writes.batchLimit }) : null;
  metrics?.watchStore(store);
  const stopHearingStorage = store.onIncident(({ level, message, error }) => log[level](error ? { err: error } : {}, message));
  const dispatcher = new WebhookDispatcher(store.webhooks, {
    config: config.webhooks,
    log: log.child({ component: 'webhooks' }),
    stopGraceMs: config.shutdownTimeoutMs / 2,
    ...(options.webhookResolver ? { resolve: options.webhookResolver } : {}),
    ...(options.webhookPollIntervalMs ? { pollIntervalMs: options.webhookPollIntervalMs } : {}),
  });
  const memory = createInstanceMemory(config.workers);
  const writer =
    store.kind === 'sqlite'
      ? new BatchWriter(store.plants, {
          batchLimit: config.writes.batchLimit,
          ...(metrics ? { observer: metrics } : {}),
          onCreated: () => dispatcher.wake(),
          gathering: { maxWaitMs: GATHER_MAX_WAIT_MS, coming: writesComing(memory) },
        })
      : null;
  let pool: WorkerPool | undefined;
  try {
    // Only one process dispatches from a SQLite file: leases a killed predecessor held are void.
    await dispatcher.start(store.kind === 'sqlite');
    if (metrics) metrics.watchWebhooks(dispatcher);
    if ((await store.tokens.list()).length === 0) {
      process.stderr.write(
        'plantstore: no API token exists yet, so every request to /plants will be refused with 401.\n' +
          'plantstore: create one with:  npx plantstore token create --name <name>\n',
      );
    }
    const port = await claimPort(config.host, config.port);
    pool = new WorkerPool({
      config,
      port,
      memory,
      log,
      tls,
      onCreated: () => dispatcher.wake(),
      handlers: (workers, slot) => mainHandlers(store, writer, metrics, workers, slot),
    });
    const url = await pool.start();
    log.info({ workers: config.workers, url }, 'every worker thread listens');
    let closing: Promise<void> | undefined;
    const running = pool;
    return {
      url,
      log,
      workers: running,
      reloadCertificate: certificateReloader(log, config.tls, (credentials) => running.useCertificate(credentials)),
      close: () =>
        (closing ??= (async () => {
          await running.stop();
          await writer?.drain();
          await dispatcher.stop();
          stopHearingStorage();
          await store.close();
        })()),
    };
  } catch (error) {
    // As a single-threaded server that cannot start: nothing opened may keep the process alive serving nothing.
    await pool?.stop().catch(() => undefined);
    await dispatcher.stop().catch(() => undefined);
    stopHearingStorage();
    await store.close().catch(() => undefined);
    throw error;
  }
}

/**
 * The port the workers will share, checked free first: another process listening on it (a second instance
 * included, which a worker's SO_REUSEPORT would otherwise join) makes the start fail as a single process's does.
 * PORT=0 picks a free port here, for every worker.
 */
async function claimPort(host: string, port: number): Promise<number> {
  const probe = createServer();
  probe.listen({ host, port });
  await Promise.race([once(probe, 'listening'), once(probe, 'error').then(([error]) => Promise.reject(error as Error))]);
  const chosen = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return chosen;
}

/** What the main thread answers a worker: on SQLite every write, and GET /metrics for the instance. */
function mainHandlers(store: Store, writer: BatchWriter | null, metrics: Metrics | null, workers: WorkerPool, slot: number): Handlers<MainOperations> {
  const sqliteOnly = (operation: string) => {
    if (writer === null) throw new Error(`${operation} is asked of the main thread only on SQLite`);
    return writer;
  };
  return {
    create: async (packed) => packOutcomes(await sqliteOnly('create').write(unpackPlants(packed), slot)),
    delete: (id) => store.plants.delete(id),
    recordTokenUse: (uses) => store.tokens.recordUse(uses),
    checkWritable: () => store.checkWritable(),
    metrics: async () => {
      const threads: ThreadMetrics[] = [{ thread: 'main', metrics: metrics ? await metrics.snapshot() : [] }];
      for (const { slot, metrics: snapshot } of await workers.metrics()) threads.push({ thread: slot, metrics: snapshot });
      return aggregateInstanceMetrics(threads, store.kind === 'sqlite').metrics();
    },
  };
}

interface PoolOptions {
  readonly config: Config;
  readonly port: number;
  readonly memory: InstanceMemory;
  readonly log: Logger;
  /** The certificate and key every worker starts with; replaced by useCertificate. */
  readonly tls: TlsCredentials | undefined;
  /** A worker committed creates itself (PostgreSQL): the dispatcher may wake. */
  readonly onCreated: () => void;
  /** What the main thread answers the worker in `slot`. */
  readonly handlers: (pool: WorkerPool, slot: number) => Handlers<MainOperations>;
}

interface Slot {
  readonly slot: number;
  worker: Worker | undefined;
  endpoint: Endpoint<WorkerOperations, MainOperations> | undefined;
  /** performance.now() when the current worker began to listen; undefined while it starts. */
  listeningSince: number | undefined;
  exited: Promise<void>;
  /** Replacements in a row that failed to start or died soon after. */
  failures: number;
  replaceTimer: NodeJS.Timeout | undefined;
}

/** The worker threads of an instance, one per slot, each replaced when it ends unexpectedly. */
export class WorkerPool {
  readonly #options: PoolOptions;
  readonly #slots: Slot[];
  #stopping = false;
  #tls: TlsCredentials | undefined;
  /** Only the first worker of the start logs what the instance serves (HTTPS, or plain HTTP beyond loopback). */
  #announced = false;

  constructor(options: PoolOptions) {
    this.#options = options;
    this.#tls = options.tls;
    this.#slots = Array.from({ length: options.config.workers }, (_, index) => ({
      slot: index + 1,
      worker: undefined,
      endpoint: undefined,
      listeningSince: undefined,
      exited: Promise.resolve(),
      failures: 0,
      replaceTimer: undefined,
    }));
  }

  /** Starts every worker; resolves with the address once all listen, rejects with the first failure. */
  async start(): Promise<string> {
    const started = await Promise.allSettled(this.#slots.map((slot) => this.#spawn(slot)));
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    return (started[0] as PromiseFulfilledResult<string>).value;
  }

  /** The worker thread in each slot now (undefined while one is being replaced), for tests. */
  threads(): Array<Worker | undefined> {
    return this.#slots.map((slot) => (slot.listeningSince === undefined ? undefined : slot.worker));
  }

  /** Each listening worker's own metrics; a worker that ends while asked, or does not answer in time, is left out. */
  async metrics(): Promise<Array<{ slot: number; metrics: MetricsSnapshot }>> {
    const answers = await Promise.all(
      this.#slots.map(async ({ slot, endpoint, listeningSince }) => {
        if (endpoint === undefined || listeningSince === undefined) return undefined;
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), WORKER_METRICS_WAIT_MS);
        });
        try {
          const metrics = await Promise.race([endpoint.call('metrics', undefined), late]);
          return metrics === undefined ? undefined : { slot, metrics };
        } catch {
          return undefined;
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    return answers.filter((answer) => answer !== undefined);
  }

  /**
   * Serves new connections with `credentials` in every worker, those still starting included, and starts every
   * later worker with them. Rejects if a worker could not use them (that worker keeps its previous pair).
   */
  async useCertificate(credentials: TlsCredentials): Promise<void> {
    this.#tls = credentials;
    const results = await Promise.allSettled(
      this.#slots.map(({ endpoint }) => endpoint?.call('useCertificate', { cert: credentials.cert, key: credentials.key })),
    );
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Drains every worker and waits for its thread to end; no worker is replaced from now on. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all(
      this.#slots.map(async (slot) => {
        clearTimeout(slot.replaceTimer);
        const { worker, endpoint, listeningSince } = slot;
        if (worker === undefined) return;
        if (endpoint !== undefined && listeningSince !== undefined) {
          try {
            await endpoint.call('drain', undefined);
          } catch (error) {
            this.#options.log.error({ worker: slot.slot, err: error }, 'a worker thread failed to drain');
          }
          const grace = setTimeout(() => void worker.terminate(), DRAINED_EXIT_GRACE_MS);
          await slot.exited;
          clearTimeout(grace);
        } else {
          await worker.terminate();
          await slot.exited;
        }
      }),
    );
  }

  /** Starts a worker in `slot`; resolves with its address once it listens, rejects if it ends before that. */
  #spawn(slot: Slot): Promise<string> {
    const { config, port, memory } = this.#options;
    const tls = this.#tls && { cert: this.#tls.cert, key: this.#tls.key, certificate: this.#tls.certificate };
    const announce = !this.#announced;
    this.#announced = true;
    const worker = new Worker(WORKER_SCRIPT, { workerData: { config, slot: slot.slot, port, memory, tls, announce } satisfies WorkerData });
    const endpoint = new Endpoint<WorkerOperations, MainOperations>((message) => worker.postMessage(message), this.#options.handlers(this, slot.slot));
    slot.worker = worker;
    slot.endpoint = endpoint;
    slot.listeningSince = undefined;
    let failure: Error | undefined;
    return new Promise((resolve, reject) => {
      worker.on('message', (message: unknown) => {
        if (endpoint.receive(message)) return;
        const notice = message as WorkerNotice;
        if (notice.kind === 'created') this.#options.onCreated();
        else if (notice.kind === 'listening') {
          slot.listeningSince = performance.now();
          resolve(notice.url);
        }
      });
      worker.on('error', (error) => {
        failure ??= error;
      });
      slot.exited = new Promise((exited) => {
        worker.once('exit', (code) => {
          endpoint.fail(new Error(`worker thread ${slot.slot} ended`));
          const wasListening = slot.listeningSince;
          if (slot.worker === worker) {
            slot.worker = undefined;
            slot.endpoint = undefined;
            slot.listeningSince = undefined;
          }
          forgetWorker(memory, slot.slot);
          exited();
          if (wasListening === undefined) reject(failure ?? new Error(`worker thread ${slot.slot} exited with code ${code} before listening`));
          else if (!this.#stopping) this.#replace(slot, code, failure, performance.now() - wasListening);
        });
      });
    });
  }

  #replace(slot: Slot, code: number, failure: Error | undefined, servedMs: number): void {
    const { log } = this.#options;
    slot.failures = servedMs >= STABLE_AFTER_MS ? 0 : slot.failures + 1;
    const delayMs = slot.failures === 0 ? 0 : Math.min(REPLACE_DELAY_MS * 2 ** (slot.failures - 1), REPLACE_DELAY_MAX_MS);
    log.error({ worker: slot.slot, exitCode: code, err: failure, replaceInMs: delayMs }, 'a worker thread ended unexpectedly; replacing it');
    const attempt = () => {
      slot.replaceTimer = undefined;
      if (this.#stopping) return;
      this.#spawn(slot).then(
        () => log.info({ worker: slot.slot }, 'the replacement worker thread listens'),
        (error: unknown) => {
          if (this.#stopping) return;
          slot.failures += 1;
          const retryInMs = Math.min(REPLACE_DELAY_MS * 2 ** (slot.failures - 1), REPLACE_DELAY_MAX_MS);
          log.error({ worker: slot.slot, err: error, retryInMs }, 'a replacement worker thread failed to start');
          slot.replaceTimer = setTimeout(attempt, retryInMs);
        },
      );
    };
    slot.replaceTimer = setTimeout(attempt, delayMs);
  }
}
