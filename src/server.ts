import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { noTokenMessage } from './auth/token-hint.js';
import type { Config } from './config.js';
import { certificateReloader, logTransportSecurity, readTlsCredentials, serveCertificate } from './http/tls.js';
import { createLogger } from './log.js';
import { startServices, type Services } from './services.js';
import { openStore, type OpenOptions } from './storage/open.js';
import type { Store } from './storage/store.js';

export interface RunningServer {
  readonly app: FastifyInstance;
  /** The address it listens on, e.g. http://127.0.0.1:8080 */
  readonly url: string;
  /** Stops accepting, answers every request in flight (their writes committed), closes storage. */
  close(): Promise<void>;
}

/**
 * Opens storage (as `open` says), starts the services on it, builds the app on them and listens: the order a process
 * comes up in.
 */
export async function startServer(config: Config, open: OpenOptions = {}): Promise<RunningServer> {
  const log = createLogger(config);
  // Before storage is opened: a certificate or key that cannot be used fails the start with nothing to close.
  const tls = config.tls ? await readTlsCredentials(config.tls) : undefined;
  const store = await openStore(config.database, open);
  let services: Services | undefined;
  let app: FastifyInstance | undefined;
  try {
    services = await startServices(config, store, log);
    app = await buildApp(services, { tls });
    if ((await store.tokens.list()).length === 0) {
      process.stderr.write(noTokenMessage(config.database, process.argv[1], process.cwd()));
    }
    const url = await app.listen({ host: config.host, port: config.port });
    logTransportSecurity(app, tls);
    return { app, url, close: closer(app, services, store) };
  } catch (error) {
    // A server that cannot start must not linger: what was opened (SQLite's checkpointer thread, PostgreSQL's
    // pooled connections, the token cache's timer) would keep the process alive serving nothing, and a supervisor
    // would see a live process. The start failure is what the caller reports; closing cannot add to it.
    await app?.close().catch(() => undefined);
    await services?.close().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw error;
  }
}

/**
 * Stops accepting, answers every request in flight, drains the services (every accepted write answered, the last
 * token uses written), then closes storage; once, however often it is called.
 */
function closer(app: FastifyInstance, services: Services, store: Store): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () =>
    (closing ??= (async () => {
      // Storage is closed even when closing the app fails, so whatever was committed is left checkpointable and
      // every connection released; the app's failure is still reported.
      let appFailure: { error: unknown } | undefined;
      await app.close().catch((error: unknown) => {
        appFailure = { error };
      });
      await services.close();
      await store.close();
      if (appFailure) throw appFailure.error;
    })());
}

/**
 * Runs until SIGTERM or SIGINT, then shuts down gracefully and exits 0 (1 if that takes too long). Signals that come
 * while it shuts down are noted and change nothing: Ctrl-C in a terminal reaches both `npm start` and the server,
 * and npm passes its copy on, so one keystroke is two SIGINTs. SHUTDOWN_TIMEOUT_MS bounds the shutdown; SIGKILL
 * ends it at once. SIGHUP reloads the TLS certificate and key.
 */
export async function serveUntilSignalled(config: Config, open: OpenOptions = {}): Promise<void> {
  // WORKERS > 1: worker threads sharing the port (src/workers/), loaded only then.
  const starting =
    config.workers > 1
      ? import('./workers/instance.js').then(({ startInstance }) => startInstance(config, { open }))
      : startServer(config, open).then((running) => ({
          log: running.app.log,
          close: running.close,
          reloadCertificate: certificateReloader(running.app.log, config.tls, (credentials) => serveCertificate(running.app, credentials)),
        }));
  // Handled from before the server listens: with WORKERS > 1 the first worker answers while the others still start,
  // and a signal then must shut the instance down gracefully once it is up, not end the process where it stands.
  let started: Awaited<typeof starting> | undefined;
  let stopping = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) {
      started?.log.info({ signal }, 'already shutting down');
      return;
    }
    stopping = true;
    const timer = setTimeout(() => {
      if (started) started.log.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timed out; exiting');
      else process.stderr.write(`plantstore: shutdown timed out after ${config.shutdownTimeoutMs} ms, still starting; exiting\n`);
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    // A start that fails is reported by the caller, which exits non-zero.
    starting.then((server) => {
      const { log } = server;
      log.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
      server.close().then(
        () => {
          log.info('shut down cleanly');
          process.exit(0);
        },
        (error: unknown) => {
          log.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    }, () => clearTimeout(timer));
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  try {
    started = await starting;
  } catch (error) {
    process.off('SIGTERM', shutdown);
    process.off('SIGINT', shutdown);
    throw error;
  }
  // With WORKERS > 1, the main thread reads the files once and every worker serves the pair it read.
  const { reloadCertificate } = started;
  process.on('SIGHUP', () => void reloadCertificate());
}
