/**
 * The one close sequence of a thread (src/workers/close-thread.ts), which the main thread, a worker thread and a
 * failed start all use: its order, and that every step runs when one before it fails. Nothing listens: the app's
 * server is a node:http Server never started, so stopping it from accepting is a no-op and the rest is recorded.
 */
import assert from 'node:assert/strict';
import { Server } from 'node:http';
import { describe, it } from 'node:test';
import { closeThread, type ClosingThread } from '../../src/workers/close-thread.js';

/** A thread whose parts record when they are closed; `failing` names the parts whose close rejects. */
function recordedThread(failing: ReadonlySet<string> = new Set(), beside = true): { thread: ClosingThread; steps: string[] } {
  const steps: string[] = [];
  const close = (part: string) => async () => {
    steps.push(part);
    if (failing.has(part)) throw new Error(`${part} failed to close`);
  };
  const thread: ClosingThread = {
    app: { server: new Server(), close: close('app') },
    services: { readiness: { startDraining: () => void steps.push('readiness') }, close: close('services') },
    ...(beside ? { besideApp: close('workers') } : {}),
    store: { close: close('store') },
  };
  return { thread, steps };
}

describe('closeThread', () => {
  it('drains readiness, then closes the app beside the other threads, then the services, then storage', async () => {
    const { thread, steps } = recordedThread();
    const told: string[] = [];
    await closeThread(thread, (pending) => told.push(pending));
    assert.deepEqual(steps, ['readiness', 'app', 'workers', 'services', 'store']);
    assert.equal(told.length, 3);
    assert.match(told[0] ?? '', /^the HTTP server: .*, in every thread$/);
    assert.match(told[1] ?? '', /^the services: /);
    assert.equal(told[2], 'closing storage');
  });

  it('says "in every thread" only when other threads close beside the app', async () => {
    const { thread } = recordedThread(new Set(), false);
    const told: string[] = [];
    await closeThread(thread, (pending) => told.push(pending));
    assert.doesNotMatch(told[0] ?? '', /every thread/);
  });

  it('still closes the services and storage when the app fails to close, and rejects with the app\'s failure', async () => {
    const { thread, steps } = recordedThread(new Set(['app']));
    await assert.rejects(closeThread(thread), /app failed to close/);
    assert.deepEqual(steps, ['readiness', 'app', 'workers', 'services', 'store']);
  });

  it('still closes storage when the other threads and the services fail to close, and rejects with the first failure', async () => {
    const { thread, steps } = recordedThread(new Set(['workers', 'services']));
    await assert.rejects(closeThread(thread), /workers failed to close/);
    assert.deepEqual(steps, ['readiness', 'app', 'workers', 'services', 'store']);
  });

  it('closes only what a start that failed part-way had started', async () => {
    const steps: string[] = [];
    await closeThread({ app: undefined, services: undefined, store: { close: async () => void steps.push('store') } });
    assert.deepEqual(steps, ['store']);
  });
});
