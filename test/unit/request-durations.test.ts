/**
 * src/observability/request-durations.ts: durations counted in cells of plain numbers are exported exactly as
 * prom-client's own Histogram exports the same observations, as text (what GET /metrics answers) and as JSON (what an
 * instance's workers send to be summed), bucket edges included.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { CellHistogram } from '../../src/observability/request-durations.js';

const BUCKETS = [0.0001, 0.001, 0.01, 0.1, 1];
const HELP = 'durations';
/** Below, on and between every bound, past the last, and 0. */
const OBSERVED = [0, 0.00005, 0.0001, 0.0002, 0.001, 0.005, 0.01, 0.1, 0.5, 1, 2.5, 30];

function both() {
  const expected = new Registry();
  const actual = new Registry();
  const histogram = new Histogram({ name: 'd_seconds', help: HELP, labelNames: ['method', 'route', 'status_code'], buckets: [...BUCKETS], registers: [expected] });
  const cells = new CellHistogram({ name: 'd_seconds', help: HELP, buckets: BUCKETS, registers: [actual] });
  return { expected, actual, histogram, cells };
}

describe('request durations in cells', () => {
  it('render the text prom-client renders for the same observations', async () => {
    const { expected, actual, histogram, cells } = both();
    assert.equal(await actual.metrics(), await expected.metrics(), 'nothing observed: no series');
    const post = cells.cell({ method: 'POST', route: '/plants', status_code: '200' });
    const get = cells.cell({ method: 'GET', route: '/plants/{id}', status_code: '404' });
    OBSERVED.forEach((seconds, index) => {
      post.observe(seconds);
      histogram.labels('POST', '/plants', '200').observe(seconds);
      if (index % 3 === 0) {
        get.observe(seconds);
        histogram.labels('GET', '/plants/{id}', '404').observe(seconds);
      }
    });
    assert.equal(await actual.metrics(), await expected.metrics());
  });

  it('give the JSON prom-client gives, which an instance sums over its workers', async () => {
    const { expected, actual, histogram, cells } = both();
    const cell = cells.cell({ method: 'DELETE', route: '/plants/{id}', status_code: '204' });
    for (const seconds of OBSERVED) {
      cell.observe(seconds);
      histogram.labels('DELETE', '/plants/{id}', '204').observe(seconds);
    }
    assert.deepEqual(await actual.getMetricsAsJSON(), await expected.getMetricsAsJSON());
  });
});
