/**
 * The path and query parameter parsers: ids are int64 in canonical decimal only (one spelling per integer), page
 * sizes 1 to MAX_PAGE_LIMIT; each refusal is a 400 naming the parameter.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BadRequestError } from '../../src/http/errors.js';
import { parseInt64Parameter, parseLimitParameter } from '../../src/http/params.js';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from '../../src/schemas.js';

describe('parseInt64Parameter', () => {
  const accepted: ReadonlyArray<readonly [text: string, value: bigint]> = [
    ['0', 0n],
    ['5', 5n],
    ['-5', -5n],
    ['10', 10n],
    ['9007199254740993', 9007199254740993n],
    ['-9007199254740993', -9007199254740993n],
    ['9223372036854775807', INT64_MAX],
    ['-9223372036854775808', INT64_MIN],
  ];
  for (const [text, value] of accepted) {
    it(`${JSON.stringify(text)} → ${value}`, () => {
      assert.equal(parseInt64Parameter(text, 'params.id'), value);
    });
  }

  const refused = [
    // One past each int64 end, and further.
    '9223372036854775808',
    '-9223372036854775809',
    '99999999999999999999',
    '-99999999999999999999',
    '123456789012345678901',
    '1' + '0'.repeat(100),
    // Not canonical: another spelling of an integer that has one.
    '-0',
    '+5',
    '05',
    '00',
    '-05',
    '0005',
    '1.0',
    '1e3',
    '0x10',
    ' 5',
    '5 ',
    // Not integers at all.
    '',
    '-',
    '+',
    '1.5',
    'abc',
    '٥',
    '５',
    'NaN',
    'Infinity',
  ];
  for (const text of refused) {
    it(`${JSON.stringify(text.length > 30 ? `${text.slice(0, 20)}…` : text)} → 400 naming the parameter`, () => {
      assert.throws(() => parseInt64Parameter(text, 'params.id'), {
        name: BadRequestError.name,
        status: 400,
        message: 'params.id must be an integer from -9223372036854775808 to 9223372036854775807 (int64) in canonical decimal',
      });
    });
  }

  it('names the parameter it is given', () => {
    assert.throws(() => parseInt64Parameter('x', 'querystring.after'), { message: /^querystring\.after must be an integer/ });
  });
});

describe('parseLimitParameter', () => {
  const accepted: ReadonlyArray<readonly [text: string | undefined, value: number]> = [
    [undefined, DEFAULT_PAGE_LIMIT],
    ['1', 1],
    ['20', 20],
    ['999', 999],
    [String(MAX_PAGE_LIMIT), MAX_PAGE_LIMIT],
  ];
  for (const [text, value] of accepted) {
    it(`${JSON.stringify(text) ?? 'absent'} → ${value}`, () => {
      assert.equal(parseLimitParameter(text, 'querystring.limit'), value);
    });
  }

  for (const text of ['0', '-1', '-0', '+5', '01', '0010', String(MAX_PAGE_LIMIT + 1), '10000', '1e3', '1.0', '', ' 5', 'x', '9007199254740993']) {
    it(`${JSON.stringify(text)} → 400 naming the parameter and the range`, () => {
      assert.throws(() => parseLimitParameter(text, 'querystring.limit'), {
        name: BadRequestError.name,
        status: 400,
        message: `querystring.limit must be an integer from 1 to ${MAX_PAGE_LIMIT} in canonical decimal (default ${DEFAULT_PAGE_LIMIT})`,
      });
    });
  }
});
