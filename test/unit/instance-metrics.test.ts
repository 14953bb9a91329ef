/**
 * One /metrics for an instance of several threads: counts summed over the threads, the process's own metrics once
 * (every thread reads the same process), each thread's isolate and loop apart under a `thread` label, and the
 * commits of whoever commits (the main thread on SQLite, the workers on PostgreSQL). The snapshots are real
 * Metrics' as each thread produces them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metrics } from '../../src/observability/metrics.js';
import { aggregateInstanceMetrics } from '../../src/workers/instance-metrics.js';
import type { MetricsSnapshot } from '../../src/workers/protocol.js';
import { parsePrometheusText, type Exposition } from '../helpers/prometheus.js';

function threadMetrics(creates: number, commits: readonly number[]): Metrics {
  const metrics = new Metrics({ batchLimit: 500 });
  for (let index = 0; index < creates; index += 1) metrics.createAnswered('created');
  for (const rows of commits) metrics.batchCommitted(rows, 0.001);
  return metrics;
}

/** The instance's exposition, read strictly (a malformed one fails here); two workers and the main thread. */
async function instanceMetrics(commitsOnMain: boolean): Promise<Exposition> {
  const main = threadMetrics(0, commitsOnMain ? [30, 40] : []);
  const one = threadMetrics(5, [10]);
  const two = threadMetrics(7, [20, 20, 20]);
  const registry = aggregateInstanceMetrics(
    [
      { thread: 'main', metrics: await main.snapshot() },
      { thread: 1, metrics: await one.snapshot() },
      { thread: 2, metrics: await two.snapshot() },
    ],
    commitsOnMain,
  );
  return parsePrometheusText(await registry.metrics());
}

const seriesOf = (exposition: Exposition, name: string) => exposition.families.get(name)?.samples.filter((sample) => sample.name === name) ?? [];

describe('aggregateInstanceMetrics', () => {
  it('sums the threads\' counts', async () => {
    assert.equal((await instanceMetrics(true)).value('plantstore_creates_total', { outcome: 'created' }), 12);
  });

  it('takes the process\'s own metrics once, from the main thread: every thread reads the same process', async () => {
    const metrics = await instanceMetrics(true);
    for (const name of ['process_resident_memory_bytes', 'process_cpu_seconds_total', 'nodejs_version_info']) {
      assert.equal(seriesOf(metrics, name).length, 1, name);
    }
    assert.equal(seriesOf(metrics, 'process_resident_memory_bytes')[0]?.labels['thread'], undefined);
  });

  it('reads the process\'s metrics as the main thread read them, start time included, rather than summing every thread\'s reading', async () => {
    const processMetric = (name: string, value: number, aggregator: 'sum' | 'omit') =>
      ({ name, help: name, type: 'counter', aggregator, values: [{ value, labels: {} }] }) as unknown as MetricsSnapshot[number];
    const reading = [processMetric('process_cpu_seconds_total', 5, 'sum'), processMetric('process_start_time_seconds', 1_700_000_000, 'omit')];
    const registry = aggregateInstanceMetrics(
      [
        { thread: 'main', metrics: reading },
        { thread: 1, metrics: reading },
        { thread: 2, metrics: reading },
      ],
      true,
    );
    const metrics = parsePrometheusText(await registry.metrics());
    assert.equal(metrics.value('process_cpu_seconds_total'), 5);
    assert.equal(metrics.value('process_start_time_seconds'), 1_700_000_000);
  });

  it('keeps each thread\'s heap and event loop apart, labelled main, worker-1, worker-2', async () => {
    const metrics = await instanceMetrics(true);
    for (const name of ['nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
      assert.deepEqual(seriesOf(metrics, name).map((sample) => sample.labels['thread']).sort(), ['main', 'worker-1', 'worker-2'], name);
    }
  });

  it('counts the commits of whoever commits: the main thread on SQLite, the workers on PostgreSQL', async () => {
    const onSqlite = await instanceMetrics(true);
    assert.equal(onSqlite.value('plantstore_commit_batch_rows_count'), 2);
    assert.equal(onSqlite.value('plantstore_commit_batch_rows_sum'), 70);
    const onPostgres = await instanceMetrics(false);
    assert.equal(onPostgres.value('plantstore_commit_batch_rows_count'), 4);
    assert.equal(onPostgres.value('plantstore_commit_batch_rows_sum'), 70);
  });
});
