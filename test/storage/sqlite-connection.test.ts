/**
 * The SQLite error codes src/storage/sqlite/connection.ts reads (from errors shaped by hand in
 * test/unit/sqlite-connection.test.ts) are what node:sqlite itself throws on real database files: a primary-key and a
 * unique violation, a write lock taken by another connection, a file that is not a database, and a folder that does
 * not exist.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, it } from 'node:test';
import {
  SQLITE_CODES,
  SQLITE_EXTENDED_CODES,
  isBusy,
  sqliteCode,
  sqliteExtendedCode,
  unavailableKind,
} from '../../src/storage/sqlite/connection.js';

/** The error `work` throws; fails if it throws none. */
function thrownBy(work: () => unknown): unknown {
  try {
    work();
  } catch (error) {
    return error;
  }
  assert.fail('expected an error');
}

describe('SQLite error codes', () => {
  it('are what node:sqlite itself throws', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-sqlite-errors-'));
    try {
      const file = path.join(dir, 'a.db');
      const db = new DatabaseSync(file);
      const other = new DatabaseSync(file, { timeout: 0 });
      try {
        db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE); INSERT INTO t VALUES (1, \'a\')');
        const primaryKey = thrownBy(() => db.exec('INSERT INTO t VALUES (1, \'b\')'));
        assert.equal((primaryKey as { code?: unknown }).code, 'ERR_SQLITE_ERROR');
        assert.equal(sqliteExtendedCode(primaryKey), SQLITE_EXTENDED_CODES.CONSTRAINT_PRIMARYKEY);
        assert.equal(sqliteExtendedCode(thrownBy(() => db.exec('INSERT INTO t VALUES (2, \'a\')'))), SQLITE_EXTENDED_CODES.CONSTRAINT_UNIQUE);
        db.exec('BEGIN IMMEDIATE');
        const busy = thrownBy(() => other.exec('BEGIN IMMEDIATE'));
        assert.ok(isBusy(busy));
        assert.equal(unavailableKind(busy), 'locked');
        db.exec('ROLLBACK');
      } finally {
        other.close();
        db.close();
      }
      const text = path.join(dir, 'text.db');
      fs.writeFileSync(text, 'not a database at all, but long enough to have a header '.repeat(100));
      const notADatabase = new DatabaseSync(text);
      try {
        assert.equal(sqliteCode(thrownBy(() => notADatabase.prepare('SELECT * FROM sqlite_schema').all())), SQLITE_CODES.NOTADB);
      } finally {
        notADatabase.close();
      }
      assert.equal(sqliteCode(thrownBy(() => new DatabaseSync(path.join(dir, 'no-such-folder', 'a.db')))), SQLITE_CODES.CANTOPEN);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
