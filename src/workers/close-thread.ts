/**
 * The one close sequence of a thread serving HTTP: the main thread's or single thread's (src/serve/server.ts), a
 * worker thread's (./worker-thread.ts), and a start that failed part-way (whatever started closes, in this order):
 *   1. /readyz answers 503, so a load balancer stops sending, and the listener stops accepting;
 *   2. the app answers every request in flight and ends its streams, while the threads beside it (on an instance's
 *      main thread, its workers) close the same way: a worker's writes still reach the main thread, which outlives
 *      every worker;
 *   3. the services drain: every accepted write answered, the last token uses written, and on the thread that has
 *      them the process's services (the webhook dispatcher) stopped;
 *   4. storage closes, then tracing (its last spans exported).
 * Every step runs even when one before it failed: storage is closed, so whatever was committed is left
 * checkpointable and every connection released. The first failure is what the close rejects with.
 */
import type { Server } from 'node:http';
import { stopAccepting } from '../http/graceful-close.js';
import type { Services } from '../services.js';
import { stopTracing } from '../tracing/tracing.js';

/** What a thread has started, each part undefined until it has: of each, what closing it takes. */
export interface ClosingThread {
  /** The app (Fastify's): its listener, and its close, which answers every request in flight. */
  readonly app: { readonly server: Server; close(): Promise<unknown> } | undefined;
  readonly services: { readonly readiness: Pick<Services['readiness'], 'startDraining'>; close(): Promise<void> } | undefined;
  /** On an instance's main thread: drains every worker thread started so far. */
  readonly besideApp?: () => Promise<void>;
  readonly store: { close(): Promise<void> } | undefined;
}

/** Closes what `thread` has started, as above; tells `progress` each step as it starts. */
export async function closeThread(thread: ClosingThread, progress: (pending: string) => void = () => undefined): Promise<void> {
  const { app, services, besideApp, store } = thread;
  const failures: unknown[] = [];
  const step = (closing: Promise<unknown> | undefined) => closing?.catch((error: unknown) => void failures.push(error));
  services?.readiness.startDraining();
  if (app) stopAccepting(app.server);
  progress('the HTTP server: connections still open, requests in flight' + (besideApp ? ', in every thread' : ''));
  await Promise.all([step(app?.close()), step(besideApp?.())]);
  progress('the services: creates queued for storage, the webhook dispatcher, token uses to record');
  await step(services?.close());
  progress('closing storage');
  await step(store?.close());
  await step(stopTracing());
  if (failures.length > 0) throw failures[0];
}
