/**
 * keysetFrom: the lowest id of the page after `after`, so every page is one `id >= from` range scan that never
 * leaves int64; nothing follows the largest int64.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import { keysetFrom } from '../../src/storage/rows.js';

describe('keysetFrom', () => {
  const cases: ReadonlyArray<readonly [after: bigint | undefined, from: bigint | undefined]> = [
    // The first page starts at the very bottom.
    [undefined, INT64_MIN],
    [INT64_MIN, INT64_MIN + 1n],
    [-1n, 0n],
    [0n, 1n],
    [9007199254740992n, 9007199254740993n],
    [INT64_MAX - 1n, INT64_MAX],
    // INT64_MAX + 1 would leave int64 (and a BIGINT parameter); there is no next page.
    [INT64_MAX, undefined],
  ];
  for (const [after, from] of cases) {
    it(`after ${after ?? '(none)'} → ${from === undefined ? 'no page' : `from ${from}`}`, () => {
      assert.equal(keysetFrom(after), from);
    });
  }
});
