/**
 * src/observability/metrics-render.ts: renderAtMostEvery, which renders GET /metrics' text at most once per interval
 * however often it is scraped, on a fake clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderAtMostEvery } from '../../src/observability/metrics-render.js';
import { FakeClock } from '../helpers/clock.js';

describe('renderAtMostEvery', () => {
  it('renders once per interval however often it is asked, concurrent asks sharing the one in flight', async () => {
    const clock = new FakeClock();
    let renders = 0;
    const render = renderAtMostEvery(1000, async () => `text ${(renders += 1)}`, clock.now);
    assert.deepEqual(await Promise.all([render(), render(), render()]), ['text 1', 'text 1', 'text 1']);
    clock.advance(999);
    assert.equal(await render(), 'text 1');
    clock.advance(1);
    assert.equal(await render(), 'text 2');
    assert.equal(renders, 2);
  });

  it('keeps no failure: the next ask renders again', async () => {
    const clock = new FakeClock();
    let calls = 0;
    const render = renderAtMostEvery(1000, async () => {
      calls += 1;
      if (calls === 1) throw new Error('gathering failed');
      return 'text';
    }, clock.now);
    await assert.rejects(render(), /gathering failed/);
    assert.equal(await render(), 'text');
  });

  it('renders every time with an interval of 0', async () => {
    let renders = 0;
    const render = renderAtMostEvery(0, async () => String((renders += 1)));
    assert.deepEqual([await render(), await render()], ['1', '2']);
  });
});
