/**
 * Where the WAL's sync runs (src/storage/sqlite/sync-placement.ts), on clocks the test moves: on the thread pool until
 * enough quick syncs in a row, then on the event loop while the loop is mostly idle; back on the pool after a slow
 * sync, or while the loop is busy with other work (its own syncs on the loop not counted as busy).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BUSY_LOOP_SHARE, LoopLoad } from '../../src/storage/sqlite/loop-load.js';
import { QUICK_SYNC_MS, QUICK_SYNCS_BEFORE_LOOP, SyncPlacement } from '../../src/storage/sqlite/sync-placement.js';

function placement() {
  const clocks = { now: 0, loopActive: 0 };
  return { clocks, placement: new SyncPlacement(new LoopLoad({ now: () => clocks.now, loopActive: () => clocks.loopActive })) };
}

/** `count` quick syncs, each deciding first, as WalSync does. */
function quickSyncs(target: SyncPlacement, count: number): boolean[] {
  return Array.from({ length: count }, () => {
    const onLoop = target.onLoop();
    target.record(QUICK_SYNC_MS / 4, onLoop);
    return onLoop;
  });
}

describe('SyncPlacement', () => {
  it('syncs on the pool until enough quick syncs in a row, then on a loop that is mostly idle', () => {
    const { clocks, placement: target } = placement();
    assert.deepEqual(new Set(quickSyncs(target, QUICK_SYNCS_BEFORE_LOOP)), new Set([false]), 'the pool first');
    clocks.now = 200;
    clocks.loopActive = 200 * (BUSY_LOOP_SHARE / 2);
    assert.equal(target.onLoop(), true, 'quick syncs and a loop busy less than the limit: on the loop');
  });

  it('goes back to the pool after one slow sync, for as many quick ones as at start', () => {
    const { clocks, placement: target } = placement();
    quickSyncs(target, QUICK_SYNCS_BEFORE_LOOP);
    clocks.now = 200;
    assert.equal(target.onLoop(), true);
    target.record(QUICK_SYNC_MS * 5, true);
    const after = quickSyncs(target, QUICK_SYNCS_BEFORE_LOOP);
    assert.deepEqual(new Set(after), new Set([false]), 'a slow disk holds the loop once');
    assert.equal(target.onLoop(), true, 'quick again for long enough: back on the loop');
  });

  it('syncs on the pool while the loop is busy, not counting its own syncs on the loop as busy', () => {
    const { clocks, placement: target } = placement();
    quickSyncs(target, QUICK_SYNCS_BEFORE_LOOP);
    clocks.now = 200;
    clocks.loopActive = 200 * BUSY_LOOP_SHARE + 10;
    assert.equal(target.onLoop(), false, 'busy past the limit: the pool, so the loop parses while the disk works');
    // The next window: busy 90 of 100 ms, 60 of them its own syncs on the loop.
    target.record(0.5, true);
    for (let sync = 0; sync < 119; sync += 1) target.record(0.5, true);
    clocks.now = 300;
    clocks.loopActive += 90;
    assert.equal(target.onLoop(), true, 'busy 30 of 100 ms besides its syncs: on the loop');
  });
});
