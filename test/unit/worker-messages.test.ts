/**
 * What enters a thread of an instance is checked where it enters (src/workers/message-checks.ts): every message the
 * threads really send passes, and one that is not what its kind says fails loudly, with a MalformedMessageError
 * naming what was wrong, rather than being used as the type it claims. Messages travel by structured clone, as
 * postMessage sends them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import type { Plant } from '../../src/plant.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { MAIN_OPERATION_CHECKS, WORKER_OPERATION_CHECKS, isWorkerNotice, readWorkerData } from '../../src/workers/message-checks.js';
import type { MainOperations, WorkerOperations } from '../../src/workers/protocol.js';
import { Endpoint, MalformedMessageError, type Handlers } from '../../src/workers/rpc.js';
import { createInstanceMemory } from '../../src/workers/shared-memory.js';
import { isPackedOutcomes, isPackedPlants, packOutcomes, packPlants } from '../../src/workers/wire.js';

const PLANTS: Plant[] = [
  { id: 9007199254740993n, name: 'Monstera', tag: 'aroid' },
  { id: -1n, name: '🌱', tag: null },
  { id: 2n, name: 'empty tag', tag: '' },
];

const posted = <T>(value: T): T => structuredClone(value);
/** A MalformedMessageError, thrown here or (by its name, as errors cross: src/workers/wire.ts) on the other side. */
const malformed = (error: unknown) => error instanceof MalformedMessageError || (error instanceof Error && error.name === 'MalformedMessageError');

describe('packed batches and outcomes', () => {
  it('pass as packed, traced or not, and an empty batch', () => {
    assert.equal(isPackedPlants(posted(packPlants(PLANTS))), true);
    assert.equal(isPackedPlants(posted(packPlants(PLANTS, ['00-aa-bb-01', undefined, undefined]))), true);
    assert.equal(isPackedPlants(posted(packPlants([]))), true);
    assert.equal(isPackedOutcomes(posted(packOutcomes([{ kind: 'created' }, { kind: 'created' }]))), true);
    const mixed = packOutcomes([{ kind: 'created' }, { kind: 'existing', stored: PLANTS[0] as Plant }, { kind: 'failed', error: new StorageUnavailableError('disk full') }]);
    assert.equal(isPackedOutcomes(posted(mixed)), true);
  });

  it('fail when the lengths do not cut the text exactly, the arrays are of another type, or a traceparent is missing', () => {
    const packed = packPlants(PLANTS, ['00-aa-bb-01', undefined, undefined]);
    assert.equal(isPackedPlants({ ...packed, text: `${packed.text}x` }), false);
    assert.equal(isPackedPlants({ ...packed, lengths: Int32Array.from(packed.lengths, (length, index) => (index === 0 ? -1 : length)) }), false);
    assert.equal(isPackedPlants({ ...packed, ids: Array.from(packed.ids) }), false);
    assert.equal(isPackedPlants({ ...packed, lengths: packed.lengths.subarray(2) }), false);
    assert.equal(isPackedPlants({ ...packed, traceparents: ['00-aa-bb-01'] }), false);
    assert.equal(isPackedPlants(undefined), false);
  });

  it('fail with an unknown kind, or a stored plant or error too few', () => {
    const mixed = packOutcomes([{ kind: 'existing', stored: PLANTS[0] as Plant }, { kind: 'failed', error: new Error('x') }]);
    assert.ok(typeof mixed === 'object');
    assert.equal(isPackedOutcomes({ ...mixed, kinds: Uint8Array.of(1, 7) }), false);
    assert.equal(isPackedOutcomes({ ...mixed, errors: [] }), false);
    assert.equal(isPackedOutcomes({ ...mixed, stored: packPlants([]) }), false);
    assert.equal(isPackedOutcomes(-1), false);
    assert.equal(isPackedOutcomes({ ...mixed, errors: [{ message: 'no name' }] }), false);
  });
});

/** A main thread's endpoint and a worker's, joined by structured clone; `tamper` may change what the worker sends. */
function pair(mainHandlers: Handlers<MainOperations>, tamper: (message: Record<string, unknown>) => unknown = (message) => message) {
  const main: Endpoint<WorkerOperations, MainOperations> = new Endpoint<WorkerOperations, MainOperations>(
    (message) => queueMicrotask(() => worker.receive(posted(message))),
    mainHandlers,
    { outgoing: WORKER_OPERATION_CHECKS, incoming: MAIN_OPERATION_CHECKS },
  );
  const worker: Endpoint<MainOperations, WorkerOperations> = new Endpoint<MainOperations, WorkerOperations>(
    (message) => queueMicrotask(() => main.receive(posted(tamper(message as Record<string, unknown>)))),
    { metrics: () => [], useCertificate: () => undefined, drain: () => undefined },
    { outgoing: MAIN_OPERATION_CHECKS, incoming: WORKER_OPERATION_CHECKS },
  );
  return { main, worker };
}

const MAIN: Handlers<MainOperations> = {
  create: (packed) => packOutcomes(Array.from(packed.ids, () => ({ kind: 'created' as const }))),
  delete: () => true,
  recordTokenUse: () => undefined,
  checkWritable: () => undefined,
  metrics: () => '# metrics',
};

describe('calls between the threads', () => {
  it('answer what the threads really send', async () => {
    const { worker } = pair(MAIN);
    assert.equal(await worker.call('create', packPlants(PLANTS)), 3);
    assert.equal(await worker.call('delete', 9007199254740993n), true);
    assert.equal(await worker.call('recordTokenUse', new Map([['ci', new Date()]])), undefined);
    assert.equal(await worker.call('metrics', undefined), '# metrics');
  });

  it('refuse a call whose argument is not what its operation takes, or an operation there is none of', async () => {
    let served = 0;
    const { worker } = pair({ ...MAIN, delete: () => (served += 1) > 0 });
    await assert.rejects(worker.call('delete', 7 as unknown as bigint), (error: Error) => malformed(error) && /argument of delete/.test(error.message));
    await assert.rejects(worker.call('create', { ...packPlants(PLANTS), text: '' }), malformed);
    await assert.rejects(worker.call('nothing' as 'delete', 1n), (error: Error) => malformed(error) && /no operation "nothing"/.test(error.message));
    assert.equal(served, 0, 'no handler ran on a malformed argument');
  });

  it('refuse a reply whose answer is not what its operation answers', async () => {
    const { main } = pair(MAIN);
    // The worker answers metrics with [], which passes; a worker that answered with text would not.
    assert.deepEqual(await main.call('metrics', undefined), []);
    const { main: other } = pair(MAIN, (message) => (message.kind === 'reply' ? { ...message, answer: 'not a snapshot' } : message));
    await assert.rejects(other.call('metrics', undefined), (error: Error) => malformed(error) && /reply to metrics/.test(error.message));
  });

  it('throw on a call or reply without its number, and leave other messages to their owner', () => {
    const { main } = pair(MAIN);
    assert.throws(() => main.receive({ kind: 'call', op: 'delete', argument: 1n }), malformed);
    assert.throws(() => main.receive({ kind: 'reply', call: 'one', answer: true }), malformed);
    assert.equal(main.receive({ kind: 'listening', url: 'http://127.0.0.1:1' }), false);
  });
});

describe('notices and workerData', () => {
  it('take a worker\'s notices and refuse what is none', () => {
    assert.equal(isWorkerNotice(posted({ kind: 'listening', url: 'http://127.0.0.1:8080' })), true);
    assert.equal(isWorkerNotice(posted({ kind: 'created' })), true);
    assert.equal(isWorkerNotice({ kind: 'listening' }), false);
    assert.equal(isWorkerNotice({ kind: 'gone' }), false);
    assert.equal(isWorkerNotice(null), false);
  });

  it('read workerData as the pool sends it, and refuse one without its memory, slot or port', () => {
    const config = loadConfig({ DATABASE_URL: 'sqlite:///tmp/plantstore-worker-messages.db', WORKERS: '3' });
    const instance = { threads: 3, port: 8080, memory: createInstanceMemory(3) };
    const data = { config, topology: { kind: 'worker', instance, slot: 2 }, tls: undefined };
    const withTopology = (topology: Record<string, unknown>) => ({ ...data, topology: { ...data.topology, ...topology } });
    assert.equal(readWorkerData(posted(data)).topology.slot, 2);
    assert.throws(() => readWorkerData(posted(withTopology({ instance: { ...instance, memory: {} } }))), (error: Error) => malformed(error) && /memory/.test(error.message));
    assert.throws(() => readWorkerData(posted(withTopology({ slot: 0 }))), (error: Error) => malformed(error) && /slot 0/.test(error.message));
    assert.throws(() => readWorkerData(posted(withTopology({ slot: 3 }))), malformed);
    assert.throws(() => readWorkerData(posted(withTopology({ instance: { ...instance, port: 'x' } }))), malformed);
    assert.throws(() => readWorkerData(posted(withTopology({ instance: { ...instance, threads: 2 } }))), (error: Error) => malformed(error) && /threads/.test(error.message));
    assert.throws(() => readWorkerData(posted(withTopology({ kind: 'main' }))), (error: Error) => malformed(error) && /topology/.test(error.message));
    assert.throws(() => readWorkerData(posted({ ...data, config: {} })), malformed);
    assert.throws(() => readWorkerData(undefined), malformed);
  });
});
