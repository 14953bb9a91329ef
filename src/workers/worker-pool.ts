/**
 * The worker threads of an instance (./instance.ts starts it), one per slot: each started with the config, its
 * topology (./topology.ts: the instance's port and shared memory, and its slot) and the certificate, answered
 * through the main thread's handlers for its slot, drained on stop, and replaced, with a growing delay if it keeps
 * dying young, when it ends unexpectedly.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import type { TlsCredentials } from '../http/tls.js';
import type { MainNotice, MainOperations, MetricsSnapshot, WorkerData, WorkerNotice, WorkerOperations } from './protocol.js';
import { MAIN_OPERATION_CHECKS, WORKER_OPERATION_CHECKS, describeMessage, isWorkerNotice } from './message-checks.js';
import { Endpoint, MalformedMessageError, type Handlers } from './rpc.js';
import { forgetWorker } from './shared-memory.js';
import type { Instance } from './topology.js';

const WORKER_SCRIPT = new URL('./worker-thread.js', import.meta.url);

/** A replacement starts at once; one that fails to start, or dies soon after, waits this long, doubling. */
const REPLACE_DELAY_MS = 500;
const REPLACE_DELAY_MAX_MS = 30_000;
/** A worker that has served this long before dying is replaced at once again: its death was not a start-up loop. */
const STABLE_AFTER_MS = 10_000;
/** A drained worker's thread ends by itself; if some handle keeps it, it is terminated after this. */
const DRAINED_EXIT_GRACE_MS = 1000;
/** GET /metrics leaves out a worker that has not answered within this (one stuck in a long task): better partial than none. */
const WORKER_METRICS_WAIT_MS = 2000;

export interface PoolOptions {
  readonly config: Config;
  /** The instance the workers are threads of: its port and shared memory. */
  readonly instance: Instance;
  /** On SQLite, the writer's durable mark (src/storage/sqlite/durable-mark.ts): a worker's reads wait on it. */
  readonly durableMark: SharedArrayBuffer | undefined;
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

  constructor(options: PoolOptions) {
    this.#options = options;
    this.#tls = options.tls;
    // The main thread serves too: WORKERS − 1 worker threads, in slots 1 and up.
    this.#slots = Array.from({ length: options.config.workers - 1 }, (_, index) => ({
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
      this.#slots.map(({ endpoint }) => endpoint?.call('useCertificate', { cert: credentials.cert, key: credentials.key, policy: credentials.policy })),
    );
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Tells every worker listening now (one message each, no answer awaited). */
  broadcast(notice: MainNotice): void {
    for (const { worker, listeningSince } of this.#slots) if (worker !== undefined && listeningSince !== undefined) worker.postMessage(notice);
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
    const { config, instance, durableMark } = this.#options;
    const tls = this.#tls && { cert: this.#tls.cert, key: this.#tls.key, policy: this.#tls.policy, certificate: this.#tls.certificate };
    const worker = new Worker(WORKER_SCRIPT, { workerData: { config, topology: { kind: 'worker', instance, slot: slot.slot }, durableMark, tls } satisfies WorkerData });
    const endpoint = new Endpoint<WorkerOperations, MainOperations>((message) => worker.postMessage(message), this.#options.handlers(this, slot.slot), {
      outgoing: WORKER_OPERATION_CHECKS,
      incoming: MAIN_OPERATION_CHECKS,
    });
    slot.worker = worker;
    slot.endpoint = endpoint;
    slot.listeningSince = undefined;
    let failure: Error | undefined;
    return new Promise((resolve, reject) => {
      worker.on('message', (message: unknown) => {
        let notice: WorkerNotice;
        try {
          if (endpoint.receive(message)) return;
          if (!isWorkerNotice(message)) throw new MalformedMessageError(`a message that is neither a call, a reply nor a notice: ${describeMessage(message)}`);
          notice = message;
        } catch (error) {
          // A worker that sends what the protocol has no word for is broken: it ends, and is replaced as any that dies.
          failure ??= error as Error;
          this.#options.log.error({ worker: slot.slot, err: error }, 'a worker thread sent a malformed message; ending it');
          void worker.terminate();
          return;
        }
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
          forgetWorker(instance.memory, slot.slot);
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
