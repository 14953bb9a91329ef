/**
 * An instance of WORKERS worker threads in one process (docs/design.md, "Workers"). Each worker runs the whole HTTP
 * app on its own event loop and listens on the one PORT with SO_REUSEPORT, so the kernel spreads connections over
 * them. The main thread serves no request: it holds what the instance has once.
 *
 *   - On SQLite, the one write connection and its group commit (./batch-writer.ts): every worker hands each batch of
 *     creates over in one message, and batches from every worker that arrive during one commit join the next.
 *   - The webhook dispatcher, so each event is sent once per attempt however many workers there are.
 *   - GET /metrics for the instance: a worker asked for it asks the main thread, which sums every thread's.
 *   - The supervision of the workers (./worker-pool.ts): a worker that ends unexpectedly is logged and replaced; close() drains every
 *     worker, then closes storage. Threads end with the process, so a SIGKILL leaves no worker behind.
 *   - With TLS, the certificate and key: read once here, at start and on each reload (SIGHUP), and handed to every
 *     worker, so every listening socket serves the same pair and a replacement worker starts with the latest one.
 *
 * What the workers share without a message per request (the write bound, the latest refusal, rate-limit buckets) is
 * in shared memory (./shared-memory.ts).
 */
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { noTokenMessage } from '../auth/token-hint.js';
import type { Config } from '../config.js';
import { certificateReloader, readTlsCredentials } from '../http/tls.js';
import { createLogger } from '../log.js';
import { Metrics } from '../metrics.js';
import { openStore, type OpenOptions } from '../storage/open.js';
import type { Store } from '../storage/store.js';
import type { Resolver } from '../webhooks/address-policy.js';
import { WebhookDispatcher } from '../webhooks/dispatcher.js';
import { BatchWriter } from './batch-writer.js';
import { aggregateInstanceMetrics, type ThreadMetrics } from './instance-metrics.js';
import type { MainOperations } from './protocol.js';
import type { Handlers } from './rpc.js';
import { createInstanceMemory, writesComing } from './shared-memory.js';
import { packOutcomes, unpackPlants } from './wire.js';
import { WorkerPool } from './worker-pool.js';

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
      process.stderr.write(noTokenMessage(config.database, process.argv[1], process.cwd()));
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
