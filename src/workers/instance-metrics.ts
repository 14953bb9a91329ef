/**
 * One GET /metrics for an instance of several threads: every thread's metrics (prom-client's JSON), summed with
 * prom-client's AggregatorRegistry as its cluster mode sums processes'. Threads differ from processes in what is
 * whose, so before summing:
 *   - process_* (CPU, resident memory, open files, start time) describe the whole process, and every thread reads
 *     the same values: they are taken from the main thread only;
 *   - nodejs_* (heap, event-loop lag, GC, handles) describe each thread's own isolate and loop: each series is kept
 *     apart with a `thread` label (main, worker-1, …), since a sum or an average of lags hides the one worker that
 *     lags; the version is the main thread's;
 *   - plantstore_commit_* are the commits of whoever commits: on SQLite the main thread, which commits every
 *     worker's batches (a worker's own figures would time its hand-off), on PostgreSQL each worker.
 * Everything else (requests, creates, the queue's depth, storage errors, token reloads, pool connections) is a
 * count or a level per thread, and the instance's is their sum.
 */
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { MetricsSnapshot } from './protocol.js';

export interface ThreadMetrics {
  /** 'main', or the worker's slot. */
  readonly thread: 'main' | number;
  readonly metrics: MetricsSnapshot;
}

export function aggregateInstanceMetrics(threads: readonly ThreadMetrics[], commitsOnMain: boolean): Registry {
  return AggregatorRegistry.aggregate(threads.map(({ thread, metrics }) => forInstance(thread, metrics, commitsOnMain)));
}

function forInstance(thread: 'main' | number, metrics: MetricsSnapshot, commitsOnMain: boolean): MetricsSnapshot {
  const label = thread === 'main' ? 'main' : `worker-${thread}`;
  const kept: MetricsSnapshot = [];
  for (const metric of metrics) {
    if (thread !== 'main') {
      if (metric.name.startsWith('process_') || metric.name === 'nodejs_version_info') continue;
      if (commitsOnMain && metric.name.startsWith('plantstore_commit_')) continue;
    } else if (!commitsOnMain && metric.name.startsWith('plantstore_commit_')) continue;
    if (metric.name.startsWith('nodejs_') && metric.name !== 'nodejs_version_info') {
      kept.push({ ...metric, values: metric.values.map((value) => ({ ...value, labels: { ...value.labels, thread: label } })) });
    } else if (metric.name.startsWith('process_')) {
      // From one thread only: its value as it is (prom-client would omit the start time, summing processes).
      kept.push({ ...metric, aggregator: 'first' });
    } else kept.push(metric);
  }
  return kept;
}
