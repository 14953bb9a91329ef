/**
 * What the worker threads of an instance share without messages: the write queue's bound (a per-instance limit, at
 * most WORKERS - 1 past it when workers admit at the same moment), the memory of the latest refusal, and token
 * buckets. The races are run on real threads: two workers taking from one bucket at once get exactly its tokens.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { SharedWrites, createInstanceMemory, forgetWorker, instanceWriteDepth, writesComing, type InstanceMemory } from '../../src/workers/shared-memory.js';

describe('SharedWrites: the write bound of an instance', () => {
  it('admits writes from every thread (the main thread is slot 0) against one limit, and each release makes room for any thread', () => {
    const memory = createInstanceMemory(2);
    const one = new SharedWrites(memory, 0, 3);
    const two = new SharedWrites(memory, 1, 3);
    assert.deepEqual([one.admit(), two.admit(), two.admit()], [true, true, true]);
    assert.deepEqual([one.admit(), two.admit()], [false, false], 'the instance holds 3, the limit');
    assert.equal(instanceWriteDepth(memory), 3);
    two.release(1);
    assert.equal(one.admit(), true);
    assert.equal(two.admit(), false);
  });

  it('forgets a dead worker\'s writes, which it will never release, so they do not hold the bound for ever', () => {
    const memory = createInstanceMemory(2);
    const dying = new SharedWrites(memory, 1, 2);
    const living = new SharedWrites(memory, 0, 2);
    assert.deepEqual([dying.admit(), dying.admit(), living.admit()], [true, true, false]);
    forgetWorker(memory, 1);
    assert.equal(instanceWriteDepth(memory), 0);
    assert.deepEqual([living.admit(), living.admit()], [true, true]);
  });

  it('tells the writer whether a worker not yet heard from has writes admitted and not handed over', () => {
    const memory = createInstanceMemory(3);
    const coming = writesComing(memory);
    const second = new SharedWrites(memory, 2, 10);
    assert.equal(coming(new Set([1])), false, 'no worker has admitted anything');
    assert.equal(second.admit(), true);
    assert.equal(coming(new Set([1])), true, 'worker 2 admitted a write it has not handed over');
    assert.equal(coming(new Set([1, 2])), false, 'worker 2\'s batch is already with the writer');
    second.release(1);
    assert.equal(coming(new Set([1])), false, 'handed over');
  });

  it('remembers the latest refusal for every worker, and forgets it when any batch commits whole', () => {
    const memory = createInstanceMemory(2);
    const one = new SharedWrites(memory, 0, 10);
    const two = new SharedWrites(memory, 1, 10);
    assert.equal(two.refusedAt, undefined);
    one.refusedAt = 1_700_000_000_123;
    assert.equal(two.refusedAt, 1_700_000_000_123);
    two.refusedAt = undefined;
    assert.equal(one.refusedAt, undefined);
  });
});

/**
 * Runs `body` (an async function of the instance memory, the shared-memory and rate-limit modules, and the thread's
 * index from 0) on `threads` threads at once; resolves with each one's answer.
 */
async function onThreads<T>(threads: number, memory: InstanceMemory, body: string): Promise<T[]> {
  const modules = {
    shared: new URL('../../src/workers/shared-memory.js', import.meta.url).href,
    rateLimit: new URL('../../src/http/rate-limit.js', import.meta.url).href,
  };
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    (async () => {
      const shared = await import(${JSON.stringify(modules.shared)});
      const rateLimit = await import(${JSON.stringify(modules.rateLimit)});
      const { memory, start, index, threads } = workerData;
      // Every thread starts together, so their work overlaps: each counts itself in, then spins until all are in.
      const gate = new Int32Array(start);
      Atomics.add(gate, 0, 1);
      while (Atomics.load(gate, 0) < threads);
      parentPort.postMessage(await (${body})(memory, shared, rateLimit, index));
    })();`;
  const start = new SharedArrayBuffer(4);
  const workers = Array.from({ length: threads }, (_, index) => new Worker(source, { eval: true, workerData: { memory, start, index, threads } }));
  const answers = workers.map(
    (worker) =>
      new Promise<T>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      }),
  );
  try {
    return await Promise.all(answers);
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}

describe('shared memory across real threads', () => {
  it('two threads taking from one token bucket at once get exactly its tokens between them', async () => {
    const memory = createInstanceMemory(2);
    const allowed = await onThreads<number>(
      2,
      memory,
      `async (memory, shared, rateLimit) => {
        const store = new rateLimit.TokenBucketStore({ max: 1, windowMs: 3_600_000, burst: 300_000 }, () => 1, new shared.SharedBucketCells(memory));
        let allowed = 0;
        for (let i = 0; i < 400_000; i += 1) store.incr('one token', (error, answer) => { if (answer.current <= 300_000) allowed += 1; });
        return allowed;
      }`,
    );
    assert.ok(allowed.every((count) => count > 0), `both threads took some: ${allowed}`);
    assert.equal(allowed[0]! + allowed[1]!, 300_000);
  });

  it('two threads admitting writes at once stay within the bound plus one (WORKERS - 1)', async () => {
    const limit = 1_000_000;
    const memory = createInstanceMemory(2);
    const admitted = await onThreads<number>(
      2,
      memory,
      `async (memory, shared, rateLimit, index) => {
        const writes = new shared.SharedWrites(memory, index, ${limit});
        let admitted = 0;
        for (let i = 0; i < ${limit}; i += 1) if (writes.admit()) admitted += 1;
        return admitted;
      }`,
    );
    const total = admitted[0]! + admitted[1]!;
    assert.ok(admitted.every((count) => count > 0), `both threads admitted some: ${admitted}`);
    assert.ok(total >= limit && total <= limit + 1, `admitted ${total} for a limit of ${limit}`);
    assert.equal(instanceWriteDepth(memory), total);
  });
});
