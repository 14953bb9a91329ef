import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { openDatabase } from '../../src/storage/sqlite/connection.js';
import { migrate, schemaObjects } from '../../src/storage/sqlite/migrations.js';
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

/**
 * SQLite prunes by age with no index on time: a search over sequences (SqliteChanges), which is exact because a
 * change is never stamped earlier than the one before it.
 */
describe('the SQLite change log prunes by age by sequence', () => {
  it('prunes exactly the changes older than the age, over gaps in the sequences', async () => {
    const db = await sqliteDatabase();
    try {
      const now = Date.now();
      const seed = (await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database)) as SqliteStore;
      await seed.close();
      const other = openDatabase(sqliteFile(db.url));
      // Sequences 10, 20, ... 400 (gaps, as failed and pruned writes leave), a minute apart, the newest now.
      for (let index = 1; index <= 40; index += 1) {
        other.exec(`INSERT INTO plant_changes (seq, kind, plant_id, name, tag, changed_at) VALUES (${index * 10}, 'created', ${index}, 'p', NULL, ${now - (40 - index) * 60_000})`);
      }
      other.close();
      const store = (await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database)) as SqliteStore;
      try {
        // Older than 25.5 minutes: the first 14, 39 to 26 minutes old.
        assert.equal(await store.changes.pruneChanges(25.5 * 60_000, 1_000_000), 14);
        assert.equal(await store.changes.oldestRetained(), 150n);
        assert.equal(await store.changes.pruneChanges(25.5 * 60_000, 1_000_000), 0);
        assert.equal(await store.changes.pruneChanges(90_000, 1_000_000), 24);
        assert.equal(await store.changes.oldestRetained(), 390n);
      } finally {
        await store.close();
      }
    } finally {
      await db.cleanup();
    }
  });

  it('stamps a change no earlier than the newest one when the clock has stepped back', async () => {
    const db = await sqliteDatabase();
    try {
      const seed = (await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database)) as SqliteStore;
      await seed.close();
      const ahead = Date.now() + 3_600_000;
      const other = openDatabase(sqliteFile(db.url));
      other.exec(`INSERT INTO plant_changes (kind, plant_id, name, tag, changed_at) VALUES ('created', 1, 'p', NULL, ${ahead})`);
      other.close();
      const store = (await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database)) as SqliteStore;
      try {
        await store.plants.create([{ id: 2n, name: 'later', tag: null }]);
        await store.plants.delete(2n);
        const changes = await store.changes.changesAfter(0n, 10);
        assert.deepEqual(changes.map((change) => change.at.getTime()), [ahead, ahead, ahead]);
        // None is older than a minute by the stamps, so pruning by age leaves them all.
        assert.equal(await store.changes.pruneChanges(60_000, 1_000_000), 0);
      } finally {
        await store.close();
      }
    } finally {
      await db.cleanup();
    }
  });
});

describe('the SQLite change log rebuilt by the migration to schema 8', () => {
  it('keeps every change of an existing log, and numbers the next after the newest', async () => {
    const db = await sqliteDatabase();
    try {
      const old = openDatabase(sqliteFile(db.url));
      migrate(old, 7);
      // Sequences 1 to 5 written, 1 and 2 pruned since: AUTOINCREMENT's counter stands at 5.
      for (let id = 1; id <= 5; id += 1) {
        old.exec(`INSERT INTO plant_changes (kind, plant_id, name, tag, changed_at) VALUES ('created', ${id}, 'p${id}', NULL, ${Date.now()})`);
      }
      old.exec('DELETE FROM plant_changes WHERE seq <= 2');
      old.close();
      const store = (await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database)) as SqliteStore;
      try {
        await store.plants.create([{ id: 9007199254740993n, name: 'after', tag: null }]);
        const changes = await store.changes.changesAfter(0n, 10);
        assert.deepEqual(
          changes.map((change) => [change.sequence, change.kind === 'created' ? change.plant.id : undefined]),
          [[3n, 3n], [4n, 4n], [5n, 5n], [6n, 9007199254740993n]],
        );
      } finally {
        await store.close();
      }
      const reopened = openDatabase(sqliteFile(db.url));
      try {
        const names = schemaObjects(reopened).map((object) => object.name);
        assert.ok(names.includes('plant_changes') && !names.includes('plant_changes_by_time') && !names.includes('plant_changes_rebuilt'), names.join(', '));
      } finally {
        reopened.close();
      }
    } finally {
      await db.cleanup();
    }
  });
});
