/**
 * The hold after a sync (src/plants/sync-hold.ts) alone, on a fake queue whose rows the test sets and a fake pacing
 * (no store, no write queue): after a sync, the next commit waits until most of as many rows wait as are being
 * answered, or until the hold's time passes with none arriving; a hold that runs out stops holding for the syncs
 * that follow. Its timers are mocked, so the hold's end comes when the test says. The hold on a real SQLite store,
 * through the write queue, is in test/storage/sqlite-wal-sync.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SyncHold } from '../../src/plants/sync-hold.js';
import type { CommitPacing } from '../../src/storage/store.js';

/** The rows a queue would have, and how often the hold asked it to flush. */
function fakeQueue(batchLimit: number, postSyncHoldMs: number) {
  const rows = { queued: 0, inFlight: 0, flushes: 0 };
  const pacing: CommitPacing = { syncing: false, afterSync: () => () => undefined };
  const hold = new SyncHold(
    { batchLimit, pacing, postSyncHoldMs },
    { queuedRows: () => rows.queued, inFlightRows: () => rows.inFlight, schedule: () => (rows.flushes += 1) },
  );
  return { rows, hold };
}

describe('SyncHold', () => {
  it('holds the next commit until three quarters of the rows answered wait again, up to the batch limit', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { rows, hold } = fakeQueue(100, 1);
    rows.inFlight = 8;
    rows.queued = 1;
    hold.afterSync();
    assert.equal(rows.flushes, 1, 'what waits is flushed in the check phase, where the hold decides');
    assert.equal(hold.held(), true, 'one row waits of the seven the hold waits for');
    rows.queued = 6;
    assert.equal(hold.held(), true);
    rows.queued = 7;
    assert.equal(hold.held(), false, 'the clients answered are back');
    assert.equal(hold.held(), false, 'the hold is over');
  });

  it('holds nothing without a hold time, or when no batch is being answered', () => {
    const { rows, hold } = fakeQueue(100, 0);
    rows.inFlight = 8;
    rows.queued = 1;
    hold.afterSync();
    assert.equal(rows.flushes, 1);
    assert.equal(hold.held(), false);
    const other = fakeQueue(100, 1);
    other.rows.queued = 3;
    other.hold.afterSync();
    assert.equal(other.rows.flushes, 1);
    assert.equal(other.hold.held(), false);
  });

  it('ends the hold once its time passes with none arriving, and then holds not for the next syncs', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { rows, hold } = fakeQueue(100, 1);
    rows.inFlight = 8;
    rows.queued = 1;
    hold.afterSync();
    rows.queued = 2;
    t.mock.timers.tick(1);
    assert.equal(hold.held(), true, 'a create arrived within the hold\'s time: held on');
    t.mock.timers.tick(1);
    assert.equal(rows.flushes, 2, 'the hold\'s end flushes the queue');
    assert.equal(hold.held(), false, 'none arrived: the commit is made');
    hold.afterSync();
    assert.equal(hold.held(), false, 'the clients did not come back: the next sync holds nothing');
  });
});
