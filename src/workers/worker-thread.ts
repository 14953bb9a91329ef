/**
 * A worker thread of an instance (./instance.ts starts it): the whole HTTP app on its own event loop, on the event
 * loop's services every thread has (src/services.ts startEventLoopServices), listening on the instance's port beside the
 * main thread and the other workers (SO_REUSEPORT: the kernel spreads connections over them), on a store that
 * writes through the main thread on SQLite (src/storage/open.ts openServingStore). It tells the main thread once it
 * listens, answers its calls (metrics, drain), and ends once drained. A failure to start ends the thread with the
 * error, which the main thread reports.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../app.js';
import { serveCertificate, type ServedPair, type TlsCredentials } from '../http/tls.js';
import { createLogger } from '../observability/log.js';
import { startTracing } from '../tracing/tracing.js';
import { createMetrics, logIncidents, startEventLoopServices, type Services } from '../services.js';
import { openServingStore } from '../storage/open.js';
import { DelegatingSqliteStore } from '../storage/sqlite/delegating-store.js';
import type { DelegatedWrites, ServingStore } from '../storage/store.js';
import { MAIN_OPERATION_CHECKS, WORKER_OPERATION_CHECKS, describeMessage, isMainNotice, readWorkerData } from './message-checks.js';
import type { MainOperations, WorkerNotice, WorkerOperations } from './protocol.js';
import { Endpoint, MalformedMessageError } from './rpc.js';
import { closeThread } from './close-thread.js';
import { instanceAppOptions, instanceWrites, listenOptions } from './topology.js';
import { packPlants, unpackOutcomes } from './wire.js';

if (parentPort === null) throw new Error('worker-thread.js runs as a worker thread of an instance (src/workers/instance.ts)');
const port = parentPort;
/** The topology is the main thread's decision (./topology.ts): its instance, and this worker's slot in it. */
const { config, topology, durableMark, tls: given } = readWorkerData(workerData);
const { slot } = topology;
// Structured clone turned the Buffers into Uint8Arrays.
const credentials: TlsCredentials | undefined = given && { ...given, cert: Buffer.from(given.cert), key: Buffer.from(given.key) };
/** The pair new connections get: the one started with until the main thread hands over a reloaded one. */
let servedPair: ServedPair | undefined = credentials;

// Synchronous writes of whole lines to the process's stdout: each worker's lines are whole among the others', and a
// worker that dies has written every line it logged.
const log = createLogger(config, pino.destination({ dest: 1, sync: true })).child({ worker: slot });

let services: Services | undefined;
let app: FastifyInstance | undefined;
let store: ServingStore | undefined;
let stopHearingStorage: (() => void) | undefined;
let draining: Promise<void> | undefined;

/** As every thread closes (./close-thread.ts): its writes still reach the main thread, which outlives every worker. */
const drain = () => {
  const opened = store;
  const closingStore = opened && {
    close: () => {
      stopHearingStorage?.();
      return opened.close();
    },
  };
  return (draining ??= closeThread({ app, services, store: closingStore }));
};

const main = new Endpoint<MainOperations, WorkerOperations>(
  (message) => port.postMessage(message),
  {
    metrics: async () => (services?.metrics ? services.metrics.snapshot() : []),
    useCertificate: async (pair) => {
      servedPair = pair;
      if (app) serveCertificate(app, pair);
    },
    drain: async () => {
      await drain();
      // Nothing of this thread is left to wait for; the port would otherwise keep the thread alive.
      setImmediate(() => port.close());
    },
  },
  { outgoing: MAIN_OPERATION_CHECKS, incoming: WORKER_OPERATION_CHECKS },
);
// The main thread sends calls, replies and the changes notice: anything else ends this thread with the error, which the
// main thread logs.
port.on('message', (message: unknown) => {
  if (main.receive(message)) return;
  if (!isMainNotice(message)) throw new MalformedMessageError(`a message that is neither a call, a reply nor a notice: ${describeMessage(message)}`);
  // Reads may go as far as the writer has made durable: a worker's own read connection sees commits before that.
  if (store instanceof DelegatingSqliteStore) store.changes.advance(message.durableThrough);
  services?.feed.wake();
});

const notify = (notice: WorkerNotice) => port.postMessage(notice);
/** At most one wake-up notice per event-loop turn, however many batches created plants in it. */
let wakePending = false;
const wakeWebhooks = () => {
  if (wakePending) return;
  wakePending = true;
  setImmediate(() => {
    wakePending = false;
    notify({ kind: 'created' });
  });
};

/** On SQLite every write is the main thread's: a batch of creates travels packed, in one message (./wire.ts). */
const writesByMain: DelegatedWrites = {
  plants: {
    create: async (plants, traceparents) => unpackOutcomes(await main.call('create', packPlants(plants, traceparents))),
    delete: (id) => main.call('delete', id),
  },
  tokens: { recordUse: (uses) => main.call('recordTokenUse', uses) },
  checkWritable: () => main.call('checkWritable', undefined),
};

try {
  // Tracing (src/tracing/): this thread's requests are traced by its own SDK, exporting on its own.
  await startTracing(config.tracing, log);
  store = await openServingStore(config.database, writesByMain, durableMark);
  stopHearingStorage = logIncidents(store, log);
  services = await startEventLoopServices(config, store, log, {
    metrics: createMetrics(config, () => main.call('metrics', undefined)),
    // On SQLite the main thread commits every create and wakes its dispatcher itself.
    onCreated: config.database.kind === 'postgres' ? wakeWebhooks : () => undefined,
    instanceWrites: instanceWrites(topology, config, config.database.kind),
  });
  app = await buildApp(services, { tls: credentials, ...instanceAppOptions(topology) });
  // A reload handed over while the app was being built.
  if (servedPair !== credentials && servedPair) serveCertificate(app, servedPair);
  // What the instance serves (HTTPS, or plain HTTP beyond loopback) the main thread has logged, once.
  const url = await app.listen(listenOptions(topology, config));
  notify({ kind: 'listening', url });
} catch (error) {
  await drain().catch(() => undefined);
  throw error;
}
