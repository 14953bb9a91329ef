/**
 * Scope names: what `--scope` accepts (one or comma lists, each a known scope, in a canonical order), what a stored
 * token grants (names this plantstore does not know grant nothing), how storage writes a list in one column, and
 * when two tokens are the same token (what copy and import compare).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SCOPES, UnknownScopeError, grantedScopes, isScope, parseScopes } from '../../src/auth/scopes.js';
import { scopesColumn, scopesOf } from '../../src/storage/token-rows.js';
import { isSameToken, type NewToken } from '../../src/storage/token-store.js';

describe('parseScopes', () => {
  it('takes scopes one by one or as comma lists, and answers each once, in the order of SCOPES', () => {
    assert.deepEqual(parseScopes(['plants:read']), ['plants:read']);
    assert.deepEqual(parseScopes(['plants:delete', 'plants:read']), ['plants:read', 'plants:delete']);
    assert.deepEqual(parseScopes(['metrics:read,plants:delete,plants:create', ' plants:read ']), [...SCOPES]);
    assert.deepEqual(parseScopes(['plants:create,plants:create', 'plants:create']), ['plants:create']);
    assert.deepEqual(parseScopes([]), []);
  });

  it('refuses a name that is not a scope, naming it and the known ones', () => {
    for (const [lists, named] of [
      [['plants:write'], 'plants:write'],
      [['plants:read,'], ''],
      [[''], ''],
      [['Plants:Read'], 'Plants:Read'],
      [['plants:read plants:create'], 'plants:read plants:create'],
    ] as const) {
      assert.throws(
        () => parseScopes(lists),
        (error: unknown) =>
          error instanceof UnknownScopeError &&
          error.scope === named &&
          error.message === `unknown scope ${JSON.stringify(named)}; the scopes are plants:read, plants:create, plants:delete, metrics:read`,
      );
    }
  });
});

describe('grantedScopes', () => {
  it('grants the known scopes a token holds and nothing for names it does not know', () => {
    assert.deepEqual([...grantedScopes(['plants:create', 'plants:admin', 'plants:read'])], ['plants:create', 'plants:read']);
    assert.equal(grantedScopes([]).size, 0);
    assert.equal(isScope('plants:admin'), false);
    assert.ok(SCOPES.every(isScope));
  });
});

describe('the scopes column', () => {
  it('holds a list as names separated by single spaces, and reads back the same list', () => {
    for (const list of [[], ['plants:read'], [...SCOPES], ['plants:read', 'plants:update']]) {
      assert.deepEqual(scopesOf(scopesColumn(list)), list);
    }
    assert.equal(scopesColumn(SCOPES), 'plants:read plants:create plants:delete metrics:read');
  });

  it('refuses a name that would not read back as one', () => {
    for (const name of ['', 'plants:read plants:create', 'tab\there', 'line\nbreak']) {
      assert.throws(() => scopesColumn([name]), /scope name must be non-empty text without whitespace/);
    }
  });
});

describe('isSameToken', () => {
  const token: NewToken = {
    name: 'ci',
    hash: Buffer.alloc(32, 1),
    scopes: ['plants:read'],
    createdAt: new Date('2026-01-01T00:00:00.000Z'),
    expiresAt: new Date('2026-04-01T00:00:00.000Z'),
  };

  it('is the same token when everything but the last use is equal', () => {
    assert.equal(isSameToken(token, { ...token, hash: Buffer.alloc(32, 1), createdAt: new Date(token.createdAt), scopes: ['plants:read'] }), true);
    assert.equal(isSameToken({ ...token, expiresAt: null }, { ...token, expiresAt: null }), true);
  });

  it('is another token when its name, hash, creation, scopes or expiry differ', () => {
    const others: NewToken[] = [
      { ...token, name: 'cd' },
      { ...token, hash: Buffer.alloc(32, 2) },
      { ...token, createdAt: new Date(token.createdAt.getTime() + 1) },
      { ...token, scopes: ['plants:read', 'plants:create'] },
      { ...token, scopes: [] },
      { ...token, expiresAt: null },
      { ...token, expiresAt: new Date(token.expiresAt!.getTime() + 1) },
    ];
    for (const other of others) {
      assert.equal(isSameToken(token, other), false, JSON.stringify(other));
      assert.equal(isSameToken(other, token), false, JSON.stringify(other));
    }
  });
});
