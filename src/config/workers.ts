/**
 * How many threads serve (WORKERS), from the environment and the host's cores, memory and Node.js; read by loadConfig
 * (./config.ts).
 */
import os from 'node:os';
import { ConfigError, read, type Env } from './variables.js';

/** What `WORKERS` depends on besides the environment; a parameter so that tests can state it. */
export interface HostFacts {
  /** os.availableParallelism(): the cores this process may run on. */
  readonly cores: number;
  /** Memory this process may use: the cgroup's limit when there is one below the machine's memory. */
  readonly memoryBytes: number;
  /** process.versions.node */
  readonly nodeVersion: string;
}

export function currentHost(): HostFacts {
  const constrained = process.constrainedMemory();
  const total = os.totalmem();
  return {
    cores: os.availableParallelism(),
    memoryBytes: constrained > 0 && constrained < total ? constrained : total,
    nodeVersion: process.versions.node,
  };
}

/**
 * Memory `WORKERS=auto` allows each worker: a worker is a V8 isolate with the whole app, and under full load one
 * process's resident memory settles below this (docs/memory.md), most of it young generation per isolate.
 */
export const AUTO_WORKER_MEMORY_BYTES = 256 * 1024 * 1024;

const MAX_WORKERS = 256;

/** The first Node.js releases whose server.listen takes `reusePort` (v22.12.0, v23.1.0): older ones ignore it. */
function listensWithReusePort(nodeVersion: string): boolean {
  const [major = 0, minor = 0] = nodeVersion.split('.').map(Number);
  return major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
}

export function workers(env: Env, host: HostFacts): number {
  const raw = read(env, 'WORKERS')?.trim() || '1';
  let count: number;
  if (raw === 'auto') count = Math.max(1, Math.min(host.cores, Math.floor(host.memoryBytes / AUTO_WORKER_MEMORY_BYTES)));
  else if (/^\d+$/.test(raw) && Number(raw) >= 1 && Number(raw) <= MAX_WORKERS) count = Number(raw);
  else throw new ConfigError('WORKERS', `must be a whole number from 1 to ${MAX_WORKERS}, or auto, got ${JSON.stringify(raw)}`);
  if (count > 1 && !listensWithReusePort(host.nodeVersion)) {
    throw new ConfigError('WORKERS', `more than 1 needs Node.js 22.12 or later, whose servers can share a port (SO_REUSEPORT); this is ${host.nodeVersion}`);
  }
  return count;
}
