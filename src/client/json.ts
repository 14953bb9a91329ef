/**
 * Exact JSON for int64 ids. JSON.parse reads every number as a double, which rounds integers past 2^53; the server
 * writes ids as integers with all their digits, so every value under an `id` key is taken from its source text as a
 * bigint. Where the runtime gives a reviver the source text (JSON.parse source text access), that is used; elsewhere
 * long integer literals are quoted before parsing, which keeps their digits.
 */

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/** An id as the API takes it: a bigint, or a number only while it is a safe integer (a larger one may be rounded already). */
export type IdInput = bigint | number;

/** The id as a bigint, or a RangeError/TypeError naming what is wrong, before anything is sent. */
export function exactId(id: IdInput, what = 'id'): bigint {
  if (typeof id === 'bigint') {
    if (id < INT64_MIN || id > INT64_MAX) throw new RangeError(`${what} ${id} is outside int64 (-2^63 to 2^63 - 1)`);
    return id;
  }
  if (typeof id === 'number') {
    if (!Number.isSafeInteger(id)) {
      throw new RangeError(
        `${what} ${id} is not a safe integer: a number past 2^53 may already be rounded; pass a bigint (${Number.isInteger(id) ? `${BigInt(id)}n?` : 'an integer'})`,
      );
    }
    return BigInt(id);
  }
  throw new TypeError(`${what} must be a bigint or a safe integer number, got ${typeof id}`);
}

/** Whether this runtime's JSON.parse hands a reviver the source text of each primitive. */
export const HAS_SOURCE_TEXT: boolean = (() => {
  let seen = false;
  JSON.parse('1', (_key, value, context?: { source?: unknown }) => {
    seen = typeof context?.source === 'string';
    return value as unknown;
  });
  return seen;
})();

/** Integers of up to 15 digits are exact as doubles: a text without a longer digit run parses exactly as it is. */
const LONG_DIGITS = /\d{16}/;

function idReviver(key: string, value: unknown, context?: { source?: string }): unknown {
  if (key === 'id' && typeof value === 'number' && context?.source !== undefined) return BigInt(context.source);
  return value;
}

/** Every number under an `id` key, and with `quoted` every string (the quoting fallback's long ones), as a bigint. */
function bigintIds(value: unknown, quoted = false): unknown {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i += 1) value[i] = bigintIds(value[i], quoted);
  } else if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      const field = record[key];
      if (key === 'id' && (typeof field === 'number' || (quoted && typeof field === 'string' && /^-?\d+$/.test(field)))) record[key] = BigInt(field);
      else if (field !== null && typeof field === 'object') bigintIds(field, quoted);
    }
  }
  return value;
}

/**
 * The text with every integer literal of 16 or more digits written as a JSON string of its digits, strings left as
 * they are: JSON.parse then keeps the digits, and bigintIds makes the ids bigints.
 */
export function quoteLongIntegers(text: string): string {
  let out = '';
  let copied = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i += 1;
      while (i < text.length && text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c ? 2 : 1;
      i += 1;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      i += 1;
      while (i < text.length && /[0-9.eE+-]/.test(text[i] as string)) i += 1;
      const literal = text.slice(start, i);
      if (/^-?\d{16,}$/.test(literal)) {
        out += `${text.slice(copied, start)}"${literal}"`;
        copied = i;
      }
    } else {
      i += 1;
    }
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** JSON.parse with every `id` an exact bigint; `sourceText` picks the path (tests run both). */
export function parseExact<T = unknown>(text: string, sourceText: boolean = HAS_SOURCE_TEXT): T {
  if (!LONG_DIGITS.test(text)) return bigintIds(JSON.parse(text)) as T;
  if (sourceText) return bigintIds(JSON.parse(text, idReviver as (key: string, value: unknown) => unknown)) as T;
  return bigintIds(JSON.parse(quoteLongIntegers(text)), true) as T;
}

/**
 * JSON.stringify that writes bigints as JSON integers with all their digits (JSON.stringify itself throws on them).
 * Strings, booleans, null, numbers, arrays and plain objects as JSON.stringify writes them.
 */
export function stringifyExact(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : stringifyExact(item))).join(',')}]`;
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON !== 'function') {
    const fields: string[] = [];
    for (const [key, field] of Object.entries(value)) {
      if (field === undefined || typeof field === 'function') continue;
      fields.push(`${JSON.stringify(key)}:${stringifyExact(field)}`);
    }
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
