/**
 * The client's exact JSON (src/client/json.ts): ids parsed to bigints with all their digits on both paths (the
 * reviver's source text, and the quoting fallback of runtimes without it), other numbers and strings left alone,
 * bigints written exactly, and number ids refused once they may be rounded.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HAS_SOURCE_TEXT, exactId, parseExact, quoteLongIntegers, stringifyExact } from '../../src/client/json.js';

const TEXT = '[{"id":9007199254740993,"name":"9007199254740993 \\" ,\\"id\\":1","tag":"x"},{"id":-9223372036854775808,"name":"a"},{"id":1,"n":12345678901234567890}]';

describe('exact JSON in the client', () => {
  it('this runtime gives revivers the source text (Node 22+ and Chromium do)', () => {
    assert.equal(HAS_SOURCE_TEXT, true);
  });

  for (const sourceText of [true, false]) {
    it(`parses every id exactly ${sourceText ? "with the reviver's source text" : 'by quoting long integers'}`, () => {
      const parsed = parseExact<Array<Record<string, unknown>>>(TEXT, sourceText);
      assert.deepEqual(
        parsed.map((plant) => plant.id),
        [9007199254740993n, -9223372036854775808n, 1n],
      );
      assert.equal(parsed[0]?.name, '9007199254740993 " ,"id":1', 'strings untouched');
      assert.deepEqual(parseExact('{"id":2}', sourceText), { id: 2n });
      assert.deepEqual(parseExact('{"id":9223372036854775807,"name":"big"}', sourceText), { id: 9223372036854775807n, name: 'big' });
    });
  }

  it('quotes only long integer literals outside strings', () => {
    assert.equal(quoteLongIntegers('{"a":"12345678901234567","b":12345678901234567,"c":1.5e300,"d":-1234567890123456}'), '{"a":"12345678901234567","b":"12345678901234567","c":1.5e300,"d":"-1234567890123456"}');
    assert.equal(quoteLongIntegers('{"a":"\\\\","b":9007199254740993}'), '{"a":"\\\\","b":"9007199254740993"}');
  });

  it('writes bigints with all their digits', () => {
    assert.equal(stringifyExact({ id: 2n ** 63n - 1n, name: 'x', tag: undefined, list: [1n, 'a', null] }), '{"id":9223372036854775807,"name":"x","list":[1,"a",null]}');
  });

  it('takes safe integer numbers and bigints in int64, and refuses the rest before anything is sent', () => {
    assert.equal(exactId(2 ** 53 - 1), 9007199254740991n);
    assert.equal(exactId(-(2n ** 63n)), -(2n ** 63n));
    assert.throws(() => exactId(2 ** 53), RangeError);
    // eslint-disable-next-line no-loss-of-precision -- the rounded literal a caller would write is the point
    assert.throws(() => exactId(9007199254740993), /not a safe integer/);
    assert.throws(() => exactId(1.5), RangeError);
    assert.throws(() => exactId(2n ** 63n), /outside int64/);
    assert.throws(() => exactId('1' as unknown as bigint), TypeError);
  });
});
