/**
 * A thread's topology (src/workers/topology.ts) and what each layer is handed by it: the single thread nothing shared,
 * an instance's threads the instance's port, write bound and clock, and only its writer (the main thread on SQLite)
 * the gathering of other threads' batches. Nothing listens: a main thread's topology is made by hand here, as
 * decideTopology would after claiming the port.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { createInstanceMemory } from '../../src/workers/shared-memory.js';
import { decideTopology, instanceAppOptions, instanceWrites, listenOptions, type Instance, type Topology } from '../../src/workers/topology.js';

const config = loadConfig({ DATABASE_URL: 'sqlite:///tmp/plantstore-topology.db', WORKERS: '3', PORT: '8080', HOST: '127.0.0.1' });

/** An instance of three threads of its own: its main thread's topology and its worker's in slot 2. */
function threeThreads(): { instance: Instance; main: Topology; worker: Topology } {
  const instance: Instance = { threads: 3, port: 41234, memory: createInstanceMemory(3) };
  return { instance, main: { kind: 'main', instance }, worker: { kind: 'worker', instance, slot: 2 } };
}

describe('a thread\'s topology', () => {
  it('is a single thread with WORKERS=1, which shares nothing and listens on PORT alone', async () => {
    const single = loadConfig({ DATABASE_URL: 'sqlite:///tmp/plantstore-topology.db', WORKERS: '1', PORT: '8080' });
    const topology = await decideTopology(single);
    assert.deepEqual(topology, { kind: 'single' });
    assert.equal(instanceWrites(topology, single, 'sqlite'), undefined);
    assert.deepEqual(instanceAppOptions(topology), {});
    const listening = listenOptions(topology, single) as Record<string, unknown>;
    assert.equal(listening.port, 8080);
    assert.equal(listening.reusePort, undefined);
  });

  it('has every thread of an instance listen on the instance\'s port beside the others', () => {
    const { main, worker } = threeThreads();
    for (const topology of [main, worker]) {
      const listening = listenOptions(topology, config) as Record<string, unknown>;
      assert.equal(listening.port, 41234);
      assert.equal(listening.reusePort, true);
    }
  });

  it('counts each thread\'s writes in its own slot of the instance\'s bound: the main thread 0, a worker its slot', () => {
    const { instance, main, worker } = threeThreads();
    assert.equal(instanceWrites(main, config, 'sqlite')?.shared?.admit(), true);
    assert.equal(instanceWrites(worker, config, 'sqlite')?.shared?.admit(), true);
    assert.deepEqual([...new Int32Array(instance.memory.writeDepths)], [1, 0, 1]);
  });

  it('gathers other threads\' batches only on the writer: the main thread on SQLite', () => {
    const { main, worker } = threeThreads();
    const writer = instanceWrites(main, config, 'sqlite')?.gathering;
    assert.equal(writer?.ownSource, 0);
    assert.equal(instanceWrites(main, config, 'postgres')?.gathering, undefined);
    assert.equal(instanceWrites(worker, config, 'sqlite')?.gathering, undefined);
    assert.equal(writer?.coming(new Set([0])), false);
    // The worker in slot 2 has a write admitted and not handed over: the writer sees it coming.
    instanceWrites(worker, config, 'sqlite')?.shared?.admit();
    assert.equal(writer?.coming(new Set([0])), true);
    assert.equal(writer?.coming(new Set([0, 2])), false);
  });

  it('gives every thread of an instance one clock and the same token buckets', () => {
    const { main, worker } = threeThreads();
    const fromMain = instanceAppOptions(main);
    const fromWorker = instanceAppOptions(worker);
    assert.ok(fromMain.now && fromWorker.now && fromMain.rateLimitCells && fromWorker.rateLimitCells);
    // One clock: read in turn from the main thread's and the worker's, it never goes back.
    const first = fromMain.now();
    const second = fromWorker.now();
    const third = fromMain.now();
    assert.ok(first <= second && second <= third, `${first} <= ${second} <= ${third}`);
    fromMain.rateLimitCells.update('token-a', () => 12_345, () => undefined);
    let seen: number | undefined;
    fromWorker.rateLimitCells.update('token-a', (fullAt) => fullAt, (_error, fullAt) => {
      seen = fullAt;
    });
    assert.equal(seen, 12_345);
  });
});
