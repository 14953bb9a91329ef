/**
 * SQLite errors told apart by their result codes (src/storage/sqlite/connection.ts): node:sqlite throws
 * `code: 'ERR_SQLITE_ERROR'` for every one and carries SQLite's extended result code in `errcode`, whose low byte is
 * the primary code. The kinds are what plantstore_storage_errors_total counts and what makes a request a 503 instead
 * of a 500. That these are the codes node:sqlite throws on a real database file is checked in
 * test/storage/sqlite-connection.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StorageErrorKind } from '../../src/storage/errors.js';
import {
  SQLITE_CODES,
  SQLITE_EXTENDED_CODES,
  isBusy,
  isConstraintViolation,
  sqliteCode,
  sqliteExtendedCode,
  unavailableKind,
} from '../../src/storage/sqlite/connection.js';

/** An error shaped as node:sqlite throws it. */
function sqliteError(errcode: number): Error {
  return Object.assign(new Error(`errcode ${errcode}`), { code: 'ERR_SQLITE_ERROR', errcode, errstr: 'from the test' });
}

describe('SQLite error codes', () => {
  it('names each result code meaning "not now" by its kind, extended codes included, and nothing else', () => {
    const kinds: Array<[string, number, StorageErrorKind | undefined]> = [
      ['SQLITE_BUSY', 5, 'locked'],
      ['SQLITE_BUSY_RECOVERY', 5 | (1 << 8), 'locked'],
      ['SQLITE_BUSY_SNAPSHOT', 5 | (2 << 8), 'locked'],
      ['SQLITE_LOCKED', 6, 'locked'],
      ['SQLITE_LOCKED_SHAREDCACHE', 6 | (1 << 8), 'locked'],
      ['SQLITE_NOMEM', 7, 'resources'],
      ['SQLITE_READONLY', 8, 'read_only'],
      ['SQLITE_READONLY_DBMOVED', 8 | (4 << 8), 'read_only'],
      ['SQLITE_IOERR', 10, 'io'],
      ['SQLITE_IOERR_FSYNC', 10 | (4 << 8), 'io'],
      ['SQLITE_CORRUPT', 11, 'io'],
      ['SQLITE_FULL', 13, 'disk_full'],
      ['SQLITE_CANTOPEN', 14, 'io'],
      ['SQLITE_PROTOCOL', 15, 'io'],
      ['SQLITE_NOTADB', 26, 'io'],
      ['SQLITE_ERROR', 1, undefined],
      ['SQLITE_INTERRUPT', 9, undefined],
      ['SQLITE_CONSTRAINT', 19, undefined],
      ['SQLITE_CONSTRAINT_PRIMARYKEY', 19 | (6 << 8), undefined],
      ['SQLITE_MISUSE', 21, undefined],
    ];
    for (const [name, errcode, kind] of kinds) assert.equal(unavailableKind(sqliteError(errcode)), kind, name);
  });

  it('reads no kind from errors that carry no SQLite result code', () => {
    assert.equal(unavailableKind(new Error('no code')), undefined);
    assert.equal(unavailableKind(Object.assign(new Error('a code name alone'), { code: 'SQLITE_BUSY' })), undefined);
    assert.equal(unavailableKind(Object.assign(new Error('no errcode'), { code: 'ERR_SQLITE_ERROR' })), undefined);
    assert.equal(unavailableKind(Object.assign(new Error('an errno'), { code: 'ENOSPC', errno: -28 })), undefined);
    for (const notAnError of [undefined, null, 'SQLITE_BUSY', 5]) assert.equal(sqliteCode(notAnError), undefined);
  });

  it('takes the primary code from the low byte of the extended one', () => {
    assert.equal(sqliteCode(sqliteError(SQLITE_EXTENDED_CODES.CONSTRAINT_UNIQUE)), SQLITE_CODES.CONSTRAINT);
    assert.equal(sqliteExtendedCode(sqliteError(SQLITE_EXTENDED_CODES.CONSTRAINT_UNIQUE)), 2067);
    assert.equal(SQLITE_EXTENDED_CODES.CONSTRAINT_PRIMARYKEY, 1555);
    assert.ok(isBusy(sqliteError(5 | (2 << 8))));
    assert.ok(!isBusy(sqliteError(6)));
    assert.ok(isConstraintViolation(sqliteError(19 | (3 << 8))));
    assert.ok(!isConstraintViolation(sqliteError(1)));
  });
});
