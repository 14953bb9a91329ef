/** The dispatcher's timer: it fires once, at the soonest time asked for since it last fired. */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { SoonestTimer } from '../../src/webhooks/soonest-timer.js';

describe('the soonest timer', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  function counted() {
    const fired = { count: 0 };
    return { fired, timer: new SoonestTimer(() => (fired.count += 1)) };
  }

  it('moves to an earlier time asked for, and fires once', () => {
    const { fired, timer } = counted();
    timer.atMost(50);
    timer.atMost(10);
    mock.timers.tick(9);
    assert.equal(fired.count, 0);
    mock.timers.tick(1);
    assert.equal(fired.count, 1);
    mock.timers.tick(100);
    assert.equal(fired.count, 1);
  });

  it('keeps the earlier time when a later one is asked for', () => {
    const { fired, timer } = counted();
    timer.atMost(10);
    timer.atMost(50);
    mock.timers.tick(10);
    assert.equal(fired.count, 1);
    mock.timers.tick(100);
    assert.equal(fired.count, 1);
  });

  it('can be set again once it fired, and cancelled', () => {
    const { fired, timer } = counted();
    timer.atMost(0);
    mock.timers.tick(0);
    timer.atMost(20);
    mock.timers.tick(20);
    assert.equal(fired.count, 2);
    timer.atMost(5);
    timer.cancel();
    mock.timers.tick(100);
    assert.equal(fired.count, 2);
  });
});
