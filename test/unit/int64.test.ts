/**
 * exactInteger reads a JSON number literal's exact value from its text, as JSON Schema sees it (12, 12.0 and 1.2e1
 * are one integer; 1.5 is none), with no double in between; isInt64 decides the range.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { INT64_MAX, INT64_MIN, exactInteger, isInt64, type ExactInteger } from '../../src/json/int64.js';

const integer = (value: bigint): ExactInteger => ({ kind: 'integer', value });
const FRACTION: ExactInteger = { kind: 'fraction' };
const HUGE: ExactInteger = { kind: 'huge', negative: false };
const HUGE_NEGATIVE: ExactInteger = { kind: 'huge', negative: true };

/** A literal as a test name: quoted, and cut short when long. */
function shown(literal: string): string {
  return literal.length > 40 ? `${JSON.stringify(literal.slice(0, 20))}… (${literal.length} characters)` : JSON.stringify(literal);
}

function described(result: ExactInteger): string {
  if (result.kind === 'integer') return `the integer ${result.value}`;
  if (result.kind === 'huge') return result.negative ? 'huge, negative' : 'huge';
  return 'not an integer';
}

describe('exactInteger', () => {
  const cases: ReadonlyArray<readonly [literal: string, expected: ExactInteger]> = [
    ['0', integer(0n)],
    ['-0', integer(0n)],
    ['0.0', integer(0n)],
    ['-0.0e-5', integer(0n)],
    // Zero stays zero whatever its exponent, even one too long to read.
    ['0e999999999', integer(0n)],
    ['5', integer(5n)],
    ['-5', integer(-5n)],
    ['1e0', integer(1n)],
    ['12.0', integer(12n)],
    ['1.2e1', integer(12n)],
    ['1.2E+1', integer(12n)],
    ['120e-1', integer(12n)],
    ['1e+02', integer(100n)],
    ['1.5', FRACTION],
    ['-1.5', FRACTION],
    ['125e-1', FRACTION],
    ['1e-1', FRACTION],
    // A double rounds this to 1; the text says it is not an integer.
    ['1.0000000000000000000001', FRACTION],
    // 2^53 + 1, the first integer a double cannot hold, and its neighbours.
    ['9007199254740992', integer(9007199254740992n)],
    ['9007199254740993', integer(9007199254740993n)],
    ['9007199254740993.0', integer(9007199254740993n)],
    ['9.007199254740993e15', integer(9007199254740993n)],
    ['-9007199254740993', integer(-9007199254740993n)],
    // The int64 ends and one past each: exact, the range is isInt64's to decide.
    ['9223372036854775807', integer(INT64_MAX)],
    ['9.223372036854775807e18', integer(INT64_MAX)],
    ['92233720368547758070e-1', integer(INT64_MAX)],
    ['9223372036854775808', integer(INT64_MAX + 1n)],
    ['-9223372036854775808', integer(INT64_MIN)],
    ['-9223372036854775809', integer(INT64_MIN - 1n)],
    // Trailing zeros of the digits count toward the exponent, not against the digit limit.
    ['1000000000000000000000000000000000000000e-30', integer(1_000_000_000n)],
    ['1e39', integer(10n ** 39n)],
    // Past 40 digits no bigint is built: far outside int64 either way.
    ['1e40', HUGE],
    ['-1e40', HUGE_NEGATIVE],
    ['1'.repeat(41), HUGE],
    ['1e400', HUGE],
    ['-1e400', HUGE_NEGATIVE],
    // Exponents of more than six digits are not even read.
    ['1e1000000', HUGE],
    ['-1e1000000', HUGE_NEGATIVE],
    ['1e' + '9'.repeat(400), HUGE],
    ['1e-1000000', FRACTION],
    ['1e-400', FRACTION],
    // Leading zeros of an exponent are no digits of it.
    ['1e0000000000001', integer(10n)],
    ['1e-0000000000001', FRACTION],
    // JSON forbids leading zeros (the JSON parser refuses them first); the value is still the number's.
    ['00012', integer(12n)],
    // Not a number literal at all: never an integer.
    ['+5', FRACTION],
    ['.5', FRACTION],
    ['5.', FRACTION],
    ['1e', FRACTION],
    ['', FRACTION],
    ['0x10', FRACTION],
    ['NaN', FRACTION],
    ['Infinity', FRACTION],
    [' 5', FRACTION],
  ];
  for (const [literal, expected] of cases) {
    it(`${shown(literal)} → ${described(expected)}`, () => {
      assert.deepEqual(exactInteger(literal), expected);
    });
  }
});

describe('isInt64', () => {
  const cases: ReadonlyArray<readonly [value: bigint, expected: boolean]> = [
    [0n, true],
    [INT64_MAX, true],
    [INT64_MAX + 1n, false],
    [INT64_MIN, true],
    [INT64_MIN - 1n, false],
    [2n ** 64n, false],
    [9007199254740993n, true],
  ];
  for (const [value, expected] of cases) {
    it(`${value} → ${expected}`, () => {
      assert.equal(isInt64(value), expected);
    });
  }

  it('has the int64 ends as its bounds: -2^63 and 2^63 - 1', () => {
    assert.equal(INT64_MIN, -9223372036854775808n);
    assert.equal(INT64_MAX, 9223372036854775807n);
  });
});
