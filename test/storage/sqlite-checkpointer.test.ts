/**
 * The SQLite store restarts a checkpointer thread that dies, after a delay that doubles with each death before a
 * successful checkpoint and starts over after one; each death and restart is reported as a storage incident. What an
 * operator sees of it (the log, /readyz) is in test/http/sqlite-checkpointer.test.ts.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store.js';
import type { StorageIncident } from '../../src/storage/store.js';
import { waitFor } from '../helpers/wait.js';

interface Fixture {
  readonly store: SqliteStore;
  readonly incidents: StorageIncident[];
  close(): Promise<void>;
}

async function fixture(restartDelayMs: number): Promise<Fixture> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-checkpointer-'));
  const store = SqliteStore.open(path.join(dir, 'plants.db'), { checkpointer: { restartDelayMs } });
  const incidents: StorageIncident[] = [];
  store.onIncident((incident) => incidents.push(incident));
  return {
    store,
    incidents,
    close: async () => {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('a checkpointer thread that keeps dying', () => {
  let f: Fixture;
  const RESTART_DELAY_MS = 200;

  before(async () => {
    f = await fixture(RESTART_DELAY_MS);
  });
  after(() => f?.close());

  it('is restarted after a delay that doubles each time it dies before checkpointing successfully', async (t) => {
    const restartGaps: number[] = [];
    for (let death = 1; death <= 3; death += 1) {
      const restarts = f.incidents.filter((incident) => /was restarted/.test(incident.message)).length;
      // Crash the thread before it ever checkpoints (its first checkpoint is an interval after it starts).
      f.store.checkpointer.command({ kind: 'crash' });
      const diedAt = performance.now();
      await waitFor(`death ${death} reported`, () => f.incidents.filter((incident) => /died/.test(incident.message)).length === death, { timeoutMs: 2000, intervalMs: 20 });
      await waitFor(`restart ${death}`, () => f.incidents.filter((incident) => /was restarted/.test(incident.message)).length === restarts + 1, { timeoutMs: 5000, intervalMs: 20 });
      restartGaps.push(Math.round(performance.now() - diedAt));
    }
    const delays = f.incidents.filter((incident) => /died/.test(incident.message)).map((incident) => Number(/in (\d+) ms/.exec(incident.message)?.[1]));
    assert.deepEqual(delays, [RESTART_DELAY_MS, 2 * RESTART_DELAY_MS, 4 * RESTART_DELAY_MS]);
    restartGaps.forEach((gap, index) => assert.ok(gap >= (delays[index] as number) - 5, `restart ${index + 1} came ${gap} ms after the death`));
    // Once it checkpoints successfully, the next death is restarted after the first delay again.
    await waitFor('a successful checkpoint', () => f.store.checkpointer.problem === undefined, { timeoutMs: 3000, intervalMs: 20 });
    f.store.checkpointer.command({ kind: 'crash' });
    await waitFor('death 4 reported', () => f.incidents.filter((incident) => /died/.test(incident.message)).length === 4, { timeoutMs: 2000, intervalMs: 20 });
    assert.match(f.incidents.filter((incident) => /died/.test(incident.message)).at(-1)?.message ?? '', new RegExp(`in ${RESTART_DELAY_MS} ms`));
    t.diagnostic(`restart delays ${delays.join(', ')} ms; restarts came ${restartGaps.join(', ')} ms after each death`);
  });
});
