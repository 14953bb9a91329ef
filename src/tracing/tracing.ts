/**
 * What the rest of the service knows of tracing: its interfaces (./types.ts), and the one instance a process (or
 * worker thread) has once startTracing has run, or none. Only the services (src/services.ts) read it here, and hand it
 * to what traces (the app, the write queue, a store's queries, the webhook dispatcher), as they hand metrics in.
 * Nothing here loads OpenTelemetry: with tracing off (no OTLP endpoint set) the SDK is never imported, no exporter
 * starts and no connection is made; every hook on a hot path is one check of the Tracing handed in against
 * undefined. The implementation on the SDK is ./sdk.ts, imported on demand.
 *
 * Spans are made by hand at the points this service controls (Fastify hooks, the write queue's observer, the
 * PostgreSQL query path, the webhook sender) rather than by OpenTelemetry's instrumentations: those patch `http`,
 * `pg` and `undici` through require/import hooks, which under ESM need a loader registered before the first import
 * (`--import`), see none of the write queue, and name spans after whatever they can see.
 */
import type { Logger } from 'pino';
import type { TracingConfig } from '../config/tracing.js';
import type { Tracing } from './types.js';

export type { Tracing } from './types.js';

let active: Tracing | undefined;

/** This thread's tracing, or undefined when it is off. */
export function activeTracing(): Tracing | undefined {
  return active;
}

/**
 * Starts tracing when it is configured, loading the SDK only then, and makes it this thread's. Called by the entry
 * (src/serve/server.ts, each worker thread) before the services start.
 */
export async function startTracing(config: TracingConfig | null, log: Logger): Promise<Tracing | undefined> {
  if (!config) return undefined;
  const { createTracing } = await import('./sdk.js');
  active = createTracing(config, log.child({ component: 'tracing' }));
  return active;
}

/** Stops this thread's tracing (flushing what is queued) and forgets it. */
export async function stopTracing(): Promise<void> {
  const stopping = active;
  active = undefined;
  await stopping?.shutdown();
}
