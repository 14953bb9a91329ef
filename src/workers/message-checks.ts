/**
 * What enters a thread of an instance, checked where it enters: a worker's workerData, each call's argument and each
 * reply's answer by operation (./rpc.ts runs them), and a worker's notices (./worker-pool.ts). Both ends are this
 * service's code, so a message that fails a check is a bug on the other side: it fails loudly with a
 * MalformedMessageError naming what was wrong, rather than being used as the type it claims. The checks are written
 * by hand rather than as TypeBox schemas: what crosses is typed arrays, a Map, a SharedArrayBuffer, none of them JSON,
 * and a batch's check runs on every create a worker hands over.
 */
import type { MainNotice, MainOperations, MetricsSnapshot, WorkerData, WorkerNotice, WorkerOperations } from './protocol.js';
import { MalformedMessageError, type OperationChecks } from './rpc.js';
import { isPackedOutcomes, isPackedPlants } from './wire.js';

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

const isNothing = (value: unknown): value is undefined => value === undefined;
const isBoolean = (value: unknown): value is boolean => typeof value === 'boolean';
const isString = (value: unknown): value is string => typeof value === 'string';
const isBigint = (value: unknown): value is bigint => typeof value === 'bigint';

/** Token names to the time of their last use. */
function isTokenUses(value: unknown): value is ReadonlyMap<string, Date> {
  if (!(value instanceof Map)) return false;
  for (const [name, at] of value) if (typeof name !== 'string' || !(at instanceof Date)) return false;
  return true;
}

/** prom-client's MetricObjectWithValues, as far as the instance's sum reads it: a name, a type and values. */
function isMetricsSnapshot(value: unknown): value is MetricsSnapshot {
  return Array.isArray(value) && value.every((metric) => isObject(metric) && typeof metric.name === 'string' && typeof metric.type === 'string' && Array.isArray(metric.values));
}

function isTlsPolicy(value: unknown): boolean {
  return isObject(value) && (value.minVersion === 'TLSv1.2' || value.minVersion === 'TLSv1.3') && typeof value.ciphers === 'string';
}

/** A certificate chain and key to serve (a Buffer arrives as a Uint8Array), with the policy to serve them under. */
function isServedPair(value: unknown): value is WorkerOperations['useCertificate'][0] {
  return isObject(value) && value.cert instanceof Uint8Array && value.key instanceof Uint8Array && isTlsPolicy(value.policy);
}

/** What a worker asks of the main thread, checked on the main thread; the answers, checked in the worker. */
export const MAIN_OPERATION_CHECKS: OperationChecks<MainOperations> = {
  create: { argument: isPackedPlants, answer: isPackedOutcomes },
  delete: { argument: isBigint, answer: isBoolean },
  recordTokenUse: { argument: isTokenUses, answer: isNothing },
  checkWritable: { argument: isNothing, answer: isNothing },
  metrics: { argument: isNothing, answer: isString },
};

/** What the main thread asks of a worker, checked in the worker; the answers, checked on the main thread. */
export const WORKER_OPERATION_CHECKS: OperationChecks<WorkerOperations> = {
  metrics: { argument: isNothing, answer: isMetricsSnapshot },
  useCertificate: { argument: isServedPair, answer: isNothing },
  drain: { argument: isNothing, answer: isNothing },
};

export function isWorkerNotice(value: unknown): value is WorkerNotice {
  return isObject(value) && ((value.kind === 'listening' && typeof value.url === 'string') || value.kind === 'created');
}

/** The one notice the main thread sends a worker: changes are durable up to a sequence (src/feed/). */
export function isMainNotice(value: unknown): value is MainNotice {
  return isObject(value) && value.kind === 'changes' && typeof value.durableThrough === 'bigint';
}

function isInstanceMemory(value: unknown): value is WorkerData['topology']['instance']['memory'] {
  return (
    isObject(value) &&
    value.writeDepths instanceof SharedArrayBuffer &&
    value.refusedAt instanceof SharedArrayBuffer &&
    value.bucketKeys instanceof SharedArrayBuffer &&
    value.bucketFullAt instanceof SharedArrayBuffer &&
    typeof value.clockOrigin === 'number'
  );
}

/** The certificate and key a worker starts with: as served, plus what a client sees of the certificate. */
function isStartCredentials(value: unknown): boolean {
  if (!isServedPair(value) || !isObject(value) || !isObject(value.certificate)) return false;
  const { subject, fingerprint256, validTo } = value.certificate;
  return typeof subject === 'string' && typeof fingerprint256 === 'string' && validTo instanceof Date;
}

/**
 * A worker's workerData, checked as it starts. The config is checked for the parts a worker reads before its app is
 * built (the database, WORKERS, the write bound), not field by field: it is the main thread's loadConfig, validated
 * and frozen there, and the sending side is held to WorkerData by the compiler.
 */
export function readWorkerData(value: unknown): WorkerData {
  const problem = workerDataProblem(value);
  if (problem !== undefined) throw new MalformedMessageError(`malformed workerData: ${problem}`);
  return value as WorkerData;
}

function workerDataProblem(value: unknown): string | undefined {
  if (!isObject(value)) return 'not an object';
  const { config, topology, durableMark, tls } = value;
  if (!isObject(config) || !isObject(config.database) || (config.database.kind !== 'sqlite' && config.database.kind !== 'postgres')) return 'config has no database';
  if (typeof config.workers !== 'number' || !isObject(config.writes) || typeof config.writes.queueLimit !== 'number') return 'config has no workers or write bound';
  if (!isObject(topology) || topology.kind !== 'worker' || !isObject(topology.instance)) return 'topology is not a worker thread\'s';
  const { slot, instance } = topology;
  const { threads, port, memory } = instance;
  if (threads !== config.workers) return `topology has ${String(threads)} threads, config.workers ${String(config.workers)}`;
  if (typeof slot !== 'number' || !Number.isInteger(slot) || slot < 1 || slot >= config.workers) return `slot ${String(slot)} is not one of 1 to WORKERS - 1`;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) return `port ${String(port)} is not a TCP port`;
  if (!isInstanceMemory(memory)) return 'memory is not the instance memory';
  if (durableMark !== undefined && !(durableMark instanceof SharedArrayBuffer)) return 'durableMark is not shared memory';
  if (tls !== undefined && !isStartCredentials(tls)) return 'tls is not a certificate and key';
  return undefined;
}

/** A message's shape for an error: its kind and operation, never its content (plants, tokens' names). */
export function describeMessage(message: unknown): string {
  if (!isObject(message)) return typeof message;
  const { kind, op } = message;
  return `{ kind: ${JSON.stringify(kind) ?? 'undefined'}${typeof op === 'string' ? `, op: ${JSON.stringify(op)}` : ''} }`;
}
