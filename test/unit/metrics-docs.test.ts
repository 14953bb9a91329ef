/**
 * docs/metrics-and-logs.md lists every metric GET /metrics serves: its table names each metric the app registers
 * (src/observability/metrics.ts), with its type and labels, and prom-client's own process and runtime metrics by their prefixes.
 * The metrics are read from a registry as GET /metrics renders it, with every optional part on (PostgreSQL's pool,
 * the webhook dispatcher) and one request timed so that every family has samples to show its labels; nothing listens.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Metrics } from '../../src/observability/metrics.js';
import { parsePrometheusText } from '../helpers/prometheus.js';

const PAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/metrics-and-logs.md');

/** Labels prom-client adds by itself: a histogram's bucket bound, a summary's quantile. */
const IMPLIED_LABELS = new Set(['le', 'quantile']);

interface Documented {
  readonly names: string[];
  readonly type: string;
  readonly labels: string[];
}

/** The rows of the page's table under "## Metrics": names (a `prefix_*` stands for a family), type and labels. */
function documentedMetrics(): Documented[] {
  const page = fs.readFileSync(PAGE, 'utf8');
  const start = page.indexOf('\n## Metrics\n');
  assert.ok(start >= 0, 'docs/metrics-and-logs.md has a Metrics section');
  const end = page.indexOf('\n## ', start + 1);
  const section = page.slice(start, end === -1 ? undefined : end);
  const rows = [...section.matchAll(/^\| (`[^|]+) \|\s*([a-z]*)\s*\|([^|]*)\|/gm)];
  assert.ok(rows.length > 0, 'the Metrics section has a table of metrics');
  const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1] as string);
  return rows.map(([, names, type, labels]) => ({ names: backticked(names as string), type: type as string, labels: backticked(labels as string) }));
}

async function registeredMetrics(): Promise<Map<string, { type: string; labels: string[] }>> {
  const metrics = new Metrics({ batchLimit: 500 });
  metrics.watchStore({ connectionPoolState: () => ({ total: 1, idle: 1, waiting: 0 }) });
  metrics.watchWebhooks({ snapshot: () => ({ waiting: 0, inFlight: 0, delivered: 0, retried: 0, failed: 0, disabled: 0 }) });
  metrics.route('/plants', new Set(['POST'])).observe('POST', 201, 0.001);
  metrics.batchCommitted(1, 0.001);
  const exposition = parsePrometheusText(await metrics.render());
  const found = new Map<string, { type: string; labels: string[] }>();
  for (const [name, family] of exposition.families) {
    const labels = new Set(family.samples.flatMap((sample) => Object.keys(sample.labels)).filter((label) => !IMPLIED_LABELS.has(label)));
    found.set(name, { type: family.type, labels: [...labels].sort() });
  }
  return found;
}

describe('docs/metrics-and-logs.md', () => {
  it('lists every metric GET /metrics serves, with its type and labels, and none it does not', async () => {
    const documented = documentedMetrics();
    const families = documented.flatMap((row) => row.names.filter((name) => name.endsWith('*')).map((name) => name.slice(0, -1)));
    const exact = new Map(documented.flatMap((row) => row.names.filter((name) => !name.endsWith('*')).map((name) => [name, row] as const)));
    const registered = await registeredMetrics();

    const ours = [...registered.keys()].filter((name) => !families.some((prefix) => name.startsWith(prefix))).sort();
    assert.deepEqual([...exact.keys()].sort(), ours, 'the table names exactly the metrics the app registers');
    for (const [name, row] of exact) {
      const metric = registered.get(name);
      assert.ok(metric, `${name} is registered`);
      assert.equal(row.type, metric.type, `${name}'s type`);
      assert.deepEqual([...row.labels].sort(), metric.labels, `${name}'s labels`);
    }
    for (const prefix of families) {
      assert.ok([...registered.keys()].some((name) => name.startsWith(prefix)), `some metric is named ${prefix}*`);
    }
  });
});
