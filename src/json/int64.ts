export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

export function isInt64(value: bigint): boolean {
  return value >= INT64_MIN && value <= INT64_MAX;
}

const NUMBER_LITERAL = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** Integer literals with more significant digits than this are far outside int64; no bigint is built for them. */
const MAX_INTEGER_DIGITS = 40;

export type ExactInteger =
  | { readonly kind: 'integer'; readonly value: bigint }
  | { readonly kind: 'huge'; readonly negative: boolean }
  | { readonly kind: 'fraction' };

/**
 * The exact value of a JSON number literal, as JSON Schema sees it: 1, 1.0 and 1e0 are the same integer,
 * 1.5 is not an integer. Works on the text, so nothing is rounded through a double.
 */
export function exactInteger(literal: string): ExactInteger {
  const match = NUMBER_LITERAL.exec(literal);
  if (!match) return { kind: 'fraction' };
  const [, sign = '', whole = '', fraction = '', exponentText = '0'] = match;
  let digits = (whole + fraction).replace(/^0+/, '');
  if (digits === '') return { kind: 'integer', value: 0n };
  // A JSON exponent can have any number of digits; anything past this is out of every range that matters.
  const exponentDigits = exponentText.replace(/^[+-]?0*/, '');
  if (exponentDigits.length > 6) {
    return exponentText.startsWith('-') ? { kind: 'fraction' } : { kind: 'huge', negative: sign === '-' };
  }
  let exponent = Number(exponentText) - fraction.length;
  const trimmed = digits.replace(/0+$/, '');
  exponent += digits.length - trimmed.length;
  digits = trimmed;
  if (exponent < 0) return { kind: 'fraction' };
  if (digits.length + exponent > MAX_INTEGER_DIGITS) return { kind: 'huge', negative: sign === '-' };
  const magnitude = BigInt(digits) * 10n ** BigInt(exponent);
  return { kind: 'integer', value: sign === '-' ? -magnitude : magnitude };
}
