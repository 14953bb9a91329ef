import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from '../app.js';
import type { Config } from '../config/config.js';
import { certificateReloader, logTransportSecurity, readTlsCredentials, serveCertificate } from '../http/tls.js';
import { createLogger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import { onServeSignal, startShutdownWatchdog, type ShutdownWatchdog } from './signals.js';
import { startServices, type MainServices, type ProcessOptions } from '../services.js';
import { openStore, type OpenOptions } from '../storage/open.js';
import { startTracing, stopTracing } from '../tracing/tracing.js';
import type { Store } from '../storage/store.js';
import { closeThread } from '../workers/close-thread.js';
import type { ThreadsBeside } from '../workers/instance.js';
import { decideTopology, instanceAppOptions, instanceWrites, listenOptions } from '../workers/topology.js';
import type { WorkerPool } from '../workers/worker-pool.js';
import { holdStreamingHeapGrowth } from './old-generation.js';

export interface RunningServer {
  readonly app: FastifyInstance;
  /** The address it listens on, e.g. http://127.0.0.1:8080 */
  readonly url: string;
  readonly log: Logger;
  /** The main thread's own metrics (with WORKERS > 1, GET /metrics answers the sum of every thread's); null when METRICS=off. */
  readonly metrics: Metrics | null;
  /** With WORKERS > 1, the worker threads beside the main thread (src/workers/); undefined for a single thread. */
  readonly workers: WorkerPool | undefined;
  /** SIGHUP: re-reads TLS_CERT_FILE and TLS_KEY_FILE and serves new connections with them, in every thread. */
  reloadCertificate(): Promise<void>;
  /** Stops accepting, answers every request in flight (their writes committed), closes storage; tells `progress` each step. */
  close(progress?: (pending: string) => void): Promise<void>;
}

/** What the entry and tests may change about how a server starts. */
export interface StartOptions extends ProcessOptions {
  /** How storage is opened (src/storage/open.ts): the command's say on creating a SQLite database. */
  readonly open?: OpenOptions;
  /** The main thread's logger; by default one made from the config (worker threads log to stdout). */
  readonly log?: Logger;
}

/** A thread alone in its process (WORKERS=1): nothing beside it. */
const ALONE: ThreadsBeside = {
  loopOptions: {},
  pool: undefined,
  start: async () => undefined,
  listening: () => undefined,
  useCertificate: async () => undefined,
  drain: undefined,
};

/**
 * Opens storage (as `open` says), starts the services on it, builds the app on them and listens: the order a process
 * comes up in. Its topology (src/workers/topology.ts) is decided here, once: with WORKERS > 1 the main thread does
 * the same on the instance's shared memory and port, and starts WORKERS − 1 worker threads beside it
 * (src/workers/instance.ts), each serving on the same port.
 */
export async function startServer(config: Config, open: OpenOptions = {}, options: StartOptions = {}): Promise<RunningServer> {
  const log = options.log ?? createLogger(config);
  // Before storage is opened: a certificate or key that cannot be used fails the start with nothing to close.
  const tls = config.tls ? await readTlsCredentials(config.tls) : undefined;
  // Tracing (src/tracing/): loaded and started only when an OTLP endpoint is configured.
  await startTracing(config.tracing, log);
  let store: Store;
  try {
    store = await openStore(config.database, options.open ?? open);
  } catch (error) {
    await stopTracing();
    throw error;
  }
  let services: MainServices | undefined;
  let app: FastifyInstance | undefined;
  let beside: ThreadsBeside = ALONE;
  try {
    const topology = await decideTopology(config);
    // Loaded only for an instance of several threads: WORKERS=1 is the single-threaded server, nothing more.
    if (topology.kind === 'main') beside = await import('../workers/instance.js').then(({ InstanceMain }) => new InstanceMain(config, topology, store));
    services = await startServices(config, store, log, { ...options, ...beside.loopOptions, instanceWrites: instanceWrites(topology, config, store.kind) });
    // The worker threads start while the main thread builds its app (each loads the whole app, the longest part of
    // a start), and the main thread listens once they all do: connections a client opens at once (a proxy's pool, a
    // load generator's) are spread over every thread, not all taken by the first to listen.
    const starting = beside.start(services, log, tls);
    // Awaited below; a failure of either part fails the start, and the catch stops what started.
    starting.catch(() => undefined);
    // V8's heap factor is the process's: held by bulk streams only where the main thread alone serves.
    app = await buildApp(services, { tls, ...instanceAppOptions(topology), ...(topology.kind === 'single' ? { whileBulkStreaming: holdStreamingHeapGrowth } : {}) });
    await starting;
    const url = await app.listen(listenOptions(topology, config));
    logTransportSecurity(app, tls);
    beside.listening(url, log);
    const served = app;
    const others = beside;
    const thread = { app, services, besideApp: others.drain, store };
    let closing: Promise<void> | undefined;
    return {
      app,
      url,
      log,
      metrics: services.metrics,
      workers: beside.pool,
      reloadCertificate: certificateReloader(log, config.tls, async (credentials) => {
        serveCertificate(served, credentials);
        await others.useCertificate(credentials);
      }),
      // Once, however often it is called.
      close: (progress) => (closing ??= closeThread(thread, progress)),
    };
  } catch (error) {
    // A server that cannot start must not linger: what was opened (SQLite's checkpointer thread, PostgreSQL's
    // pooled connections, the token cache's timer, worker threads) would keep the process alive serving nothing,
    // and a supervisor would see a live process. The start failure is what the caller reports; closing cannot add
    // to it.
    await closeThread({ app, services, besideApp: beside.drain, store }).catch(() => undefined);
    throw error;
  }
}

/** How long after SHUTDOWN_TIMEOUT_MS the watchdog kills a server that has not managed to exit by itself. */
const WATCHDOG_GRACE_MS = 500;

/**
 * Runs until SIGTERM or SIGINT, then shuts down gracefully and exits 0 (1 if that takes too long). Signals that come
 * while it shuts down are noted and change nothing: Ctrl-C in a terminal reaches both `npm start` and the server,
 * and npm passes its copy on, so one keystroke is two SIGINTs. SIGHUP reloads the TLS certificate and key.
 *
 * Signals are caught from the launcher's first instruction (src/serve/signals.ts): one that came before this runs is
 * handled now, and one during start-up too: SIGTERM waits for the start to finish, then shuts down; SIGHUP is logged
 * and ignored (the start is reading the files anyway). SHUTDOWN_TIMEOUT_MS bounds the shutdown from the signal: at
 * the deadline the process exits 1, saying what was pending, and if it cannot even do that (its event loop blocked,
 * its exit waiting on a stuck thread) the watchdog kills it WATCHDOG_GRACE_MS later. SIGKILL ends it at once.
 */
export async function serveUntilSignalled(config: Config, open: OpenOptions = {}): Promise<void> {
  // WORKERS > 1: worker threads beside the main thread, sharing the port (src/workers/), loaded only then.
  const starting = startServer(config, open);
  let started: Awaited<typeof starting> | undefined;
  let stopping = false;
  let pending = 'the start-up: opening storage, starting the services, listening';
  let watchdog: ShutdownWatchdog | undefined;
  const progress = (what: string) => {
    pending = what;
    watchdog?.pending(what);
  };
  /** Through the logger once there is one; before, a line on stderr, as the command's other start-up messages. */
  const note = (level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, message: string) => {
    if (started) started.log[level](fields, message);
    else process.stderr.write(`plantstore: ${message} ${JSON.stringify(fields)}\n`);
  };

  const shutdown = (signal: NodeJS.Signals, receivedAt: number) => {
    if (stopping) {
      note('info', { signal }, 'already shutting down');
      return;
    }
    stopping = true;
    const remainingMs = Math.max(0, config.shutdownTimeoutMs - (performance.now() - receivedAt));
    watchdog = startShutdownWatchdog(Date.now() + remainingMs + WATCHDOG_GRACE_MS, (error) =>
      note('warn', { err: error.message }, 'the shutdown watchdog did not start; the deadline is kept by this process alone'),
    );
    watchdog?.pending(pending);
    const timer = setTimeout(() => {
      note('error', { timeoutMs: config.shutdownTimeoutMs, pending }, 'shutdown timed out; exiting');
      process.exit(1);
    }, remainingMs);
    timer.unref();
    // A start that fails is reported by the caller, which exits non-zero.
    starting.then(
      (server) => {
        const { log } = server;
        log.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
        progress('closing');
        server.close(progress).then(
          () => {
            log.info('shut down cleanly');
            process.exit(0);
          },
          (error: unknown) => {
            log.error({ err: error }, 'shutdown failed');
            process.exit(1);
          },
        );
      },
      () => clearTimeout(timer),
    );
  };
  const stopHandling = onServeSignal((signal, receivedAt) => {
    if (signal !== 'SIGHUP') shutdown(signal, receivedAt);
    else if (stopping) note('info', { signal }, 'SIGHUP while shutting down: ignored');
    // With WORKERS > 1, the main thread reads the files once and every worker serves the pair it read.
    else if (started) void started.reloadCertificate();
    else note('info', { signal }, 'SIGHUP during start-up, before the TLS files are read and served: ignored');
  });
  try {
    started = await starting;
  } catch (error) {
    stopHandling();
    throw error;
  }
}
