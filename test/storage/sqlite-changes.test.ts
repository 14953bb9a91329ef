import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { openDatabase } from '../../src/storage/sqlite/connection.js';
import { sqliteFile } from '../helpers/transfer.js';
import { sqliteDatabase } from '../helpers/databases.js';
import type { SqliteStore } from '../../src/storage/sqlite/sqlite-store.js';

/**
 * SQLite's change log publishes nothing past what its writer announced durable (SqliteChanges.changesDurable): a read
 * connection sees a commit before the sync that makes it durable, once that sync no longer happens inside the commit.
 */
describe('the SQLite change log reads only what was announced durable', () => {
  it('leaves out a committed change until its sequence is announced, then reads it', async () => {
    const db = await sqliteDatabase();
    try {
      const store = (await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database)) as SqliteStore;
      try {
        await store.plants.create([{ id: 1n, name: 'announced', tag: null }]);
        const announced = await store.changes.newestSequence();
        assert.equal(announced, store.changes.durableThrough);
        // A commit the store's write path has not announced (as one awaiting its sync would be).
        const other = openDatabase(sqliteFile(db.url));
        other.exec(`INSERT INTO plant_changes (kind, plant_id, name, tag, changed_at) VALUES ('created', 2, 'pending', NULL, ${Date.now()})`);
        other.close();
        assert.deepEqual((await store.changes.changesAfter(0n, 10)).map((change) => change.sequence), [announced]);
        assert.equal(await store.changes.newestSequence(), announced);
        store.changes.changesDurable(announced + 1n);
        assert.deepEqual((await store.changes.changesAfter(0n, 10)).map((change) => change.sequence), [announced, announced + 1n]);
        assert.equal(await store.changes.newestSequence(), announced + 1n);
      } finally {
        await store.close();
      }
    } finally {
      await db.cleanup();
    }
  });
});
