/**
 * How a thread serves HTTP, decided once as it starts (docs/design/workers.md): alone in its process
 * (WORKERS=1), as the main thread of an instance of WORKERS threads, or as the worker thread in one of its slots.
 * What differs by it is read here and nowhere else: each layer is handed what it takes (the write queue the
 * instance's bound, the app the shared clock and token buckets, the listener its port), never the topology, so no
 * layer below the entry knows there are threads.
 */
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import type { FastifyListenOptions } from 'fastify';
import type { AppOptions } from '../app.js';
import type { Config } from '../config/config.js';
import { listenBacklog } from '../http/http-server.js';
import type { InstanceWrites } from '../services.js';
import type { Store } from '../storage/store.js';
import { MAIN_SLOT, SharedBucketCells, SharedWrites, createInstanceMemory, sharedClock, writesComing, type InstanceMemory } from './shared-memory.js';

/** What every thread of an instance has alike. */
export interface Instance {
  /** WORKERS: the main thread and WORKERS − 1 worker threads. */
  readonly threads: number;
  /** The port every thread listens on with SO_REUSEPORT (PORT, or the one chosen for PORT=0), checked free. */
  readonly port: number;
  /** What the threads share without a message per request (./shared-memory.ts). */
  readonly memory: InstanceMemory;
}

export type Topology =
  | { readonly kind: 'single' }
  | { readonly kind: 'main'; readonly instance: Instance }
  | { readonly kind: 'worker'; readonly instance: Instance; readonly slot: number };

export type MainTopology = Extract<Topology, { kind: 'main' }>;
/** What the main thread hands each worker thread it starts (its workerData): the instance, and the worker's slot. */
export type WorkerTopology = Extract<Topology, { kind: 'worker' }>;

/**
 * The longest the writer holds a commit for a batch another thread is about to hand over (WriteQueue's Gathering):
 * about one commit's fsync, so a held commit costs a create at most what waiting for the next would.
 */
const GATHER_MAX_WAIT_MS = 1;

/** The topology of the thread the entry runs in: alone, or the main thread of an instance (port claimed, memory made). */
export async function decideTopology(config: Config): Promise<Extract<Topology, { kind: 'single' | 'main' }>> {
  if (config.workers <= 1) return { kind: 'single' };
  return { kind: 'main', instance: { threads: config.workers, port: await claimPort(config.host, config.port), memory: createInstanceMemory(config.workers) } };
}

/** Its slot in the instance's shared memory: the main thread's is 0, the workers' 1 to WORKERS − 1. */
function slotOf(topology: Exclude<Topology, { kind: 'single' }>): number {
  return topology.kind === 'main' ? MAIN_SLOT : topology.slot;
}

/** Where and how it listens: a thread of an instance on the instance's port, beside the others (SO_REUSEPORT). */
export function listenOptions(topology: Topology, config: Config): FastifyListenOptions {
  const backlog = listenBacklog(config.http, config.workers);
  if (topology.kind === 'single') return { host: config.host, port: config.port, backlog };
  // Fastify hands its listen options to Node's server.listen, which takes reusePort (Node 22.12+, checked by
  // loadConfig); Fastify's types do not list it.
  return { host: config.host, port: topology.instance.port, reusePort: true, backlog } as FastifyListenOptions;
}

/**
 * What its write queue shares with the other threads' (services' InstanceWrites): the instance's bound and latest
 * refusal, and for the writer (the main thread on SQLite) the gathering of the batches other threads are about to
 * hand over. On PostgreSQL each thread commits its own: nothing is handed over, so nothing to wait for.
 */
export function instanceWrites(topology: Topology, config: Config, kind: Store['kind']): InstanceWrites | undefined {
  if (topology.kind === 'single') return undefined;
  const { memory } = topology.instance;
  const shared = new SharedWrites(memory, slotOf(topology), config.writes.queueLimit);
  if (topology.kind === 'worker' || kind !== 'sqlite') return { shared };
  return { shared, gathering: { ownSource: MAIN_SLOT, maxWaitMs: GATHER_MAX_WAIT_MS, coming: writesComing(memory) } };
}

/** What its app shares with the other threads': the clock token buckets refill by, and the buckets. */
export function instanceAppOptions(topology: Topology): Pick<AppOptions, 'now' | 'rateLimitCells'> {
  if (topology.kind === 'single') return {};
  const { memory } = topology.instance;
  return { now: sharedClock(memory), rateLimitCells: new SharedBucketCells(memory) };
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
