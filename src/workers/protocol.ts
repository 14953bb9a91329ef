/** What the main thread and a worker thread of an instance say to each other (./rpc.ts carries the calls). */
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Config } from '../config/config.js';
import type { ServedPair, TlsCredentials } from '../http/tls.js';
import type { WorkerTopology } from './topology.js';
import type { PackedOutcomes, PackedPlants } from './wire.js';

export type MetricsSnapshot = Array<MetricObjectWithValues<MetricValue<string>>>;

/**
 * What a worker asks of the main thread. On SQLite the main thread holds the one writer, so every write is asked
 * for here (a batch of creates is one call); on PostgreSQL a worker writes through its own pool and asks only for
 * the instance's metrics.
 */
export type MainOperations = {
  readonly create: readonly [PackedPlants, PackedOutcomes];
  readonly delete: readonly [bigint, boolean];
  readonly recordTokenUse: readonly [ReadonlyMap<string, Date>, void];
  readonly checkWritable: readonly [undefined, void];
  /** GET /metrics: every thread's metrics, summed, as Prometheus text. */
  readonly metrics: readonly [undefined, string];
};

/** What the main thread asks of a worker. */
export type WorkerOperations = {
  /** This worker's metrics, to be summed with the others'. */
  readonly metrics: readonly [undefined, MetricsSnapshot];
  /** Serve new connections with this certificate chain and key (SIGHUP's reload); open connections keep theirs. */
  readonly useCertificate: readonly [ServedPair, void];
  /** Stop accepting, answer every request in flight, close; the worker thread then ends. */
  readonly drain: readonly [undefined, void];
};

/** Messages that are not calls: a worker listening, and a worker that created plants (the dispatcher may wake). */
export type WorkerNotice = { readonly kind: 'listening'; readonly url: string } | { readonly kind: 'created' };

/**
 * Messages from the main thread that are not calls: on SQLite, changes were committed (by the main thread, the
 * instance's one writer) and are durable through that sequence: each worker's change feed reads the log up to it,
 * once, and fans the changes out to its streams.
 */
export type MainNotice = { readonly kind: 'changes'; readonly durableThrough: bigint };

/** A worker's workerData. */
export interface WorkerData {
  readonly config: Config;
  /**
   * The main thread's instance (its port and shared memory) and this worker's slot, 1 to WORKERS − 1; a replacement
   * takes the slot of the worker it replaces.
   */
  readonly topology: WorkerTopology;
  /** On SQLite, the writer's durable mark: nothing this worker reads is answered before it is durable. */
  readonly durableMark: SharedArrayBuffer | undefined;
  /** With TLS, the certificate and key to serve (read and checked by the main thread); a Buffer arrives as a Uint8Array. */
  readonly tls: TlsCredentials | undefined;
}
