/** How GET /metrics' text is rendered: at most once per interval, with the process's own metrics collected once. */
import { Registry, collectDefaultMetrics } from 'prom-client';

/**
 * `render`, answered from one result for `maxAgeMs` after it started: however often it is asked (concurrent asks
 * share the one in flight), it runs at most once per `maxAgeMs`. A scrape then costs what sending the text costs,
 * and an instance of worker threads gathers every thread's metrics at most once per `maxAgeMs` too. A failed render
 * is not kept. With `maxAgeMs` 0 every ask renders.
 */
export function renderAtMostEvery(maxAgeMs: number, render: () => Promise<string>, now: () => number = () => performance.now()): () => Promise<string> {
  if (maxAgeMs <= 0) return render;
  let latest: { readonly at: number; readonly text: Promise<string> } | undefined;
  return () => {
    const at = now();
    if (latest !== undefined && at - latest.at < maxAgeMs) return latest.text;
    const text = render();
    const entry = { at, text };
    latest = entry;
    text.catch(() => {
      if (latest === entry) latest = undefined;
    });
    return text;
  };
}

let processRegistry: Registry | undefined;

/**
 * The process's own metrics (memory, CPU, event loop lag, GC, heap), as prom-client collects them by default. They
 * belong to the process, not to an app: they are collected once however many apps a process builds (tests build
 * many), since each collection starts an event-loop monitor and a GC observer that cannot be stopped.
 */
export function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}
