import { isUtf8 } from 'node:buffer';
import { parse as parseLossless } from 'lossless-json';
import { INT64_MAX, INT64_MIN, exactInteger, isInt64 } from '../json/int64.js';
import type { NewPlantBody } from '../schemas.js';
import type { Plant } from '../plant.js';
import { BadRequestError, UnsupportedMediaTypeError } from './errors.js';

/** Where the exact value of a top-level `id` travels when its JSON number does not fit a double exactly. */
const EXACT_ID = Symbol('exactId');

export type ParsedJson = unknown;

/** Bytes the fast path looks for (a byte at or above 0x80 is part of a multi-byte character, never one of these). */
const BACKSLASH = 0x5c;
const QUOTE = 0x22;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const AFTER_A_DIGIT = new Set([0x2e, 0x45, 0x65]); // . E e: a fraction or an exponent
/** A run of this many digits may pass 2^53 (9007199254740993 has 16). */
const LONGEST_EXACT_RUN = 15;
/** The contract's keys, quoted, as bytes: JSON.parse keeps the last copy of a repeated key without a word. */
const CONTRACT_KEYS = ['"id"', '"name"', '"tag"'].map((key) => Buffer.from(key));

function spellsAt(body: Buffer, at: number, key: Buffer): boolean {
  if (at + key.length > body.length) return false;
  for (let offset = 1; offset < key.length; offset += 1) if (body[at + offset] !== key[offset]) return false;
  return true;
}

/**
 * Whether JSON.parse reads `body` exactly and unambiguously: no escape (which could spell a key twice or a lone
 * surrogate), no run of digits long enough to pass 2^53, no fraction or exponent directly after a digit, and none of
 * the contract's keys twice. Anything else, including such text inside strings, takes the exact path: slower, never
 * wrong. One pass over the bytes, since every create's body takes it.
 */
export function readsExactly(body: Buffer): boolean {
  let digits = 0;
  let seen = 0;
  for (let at = 0; at < body.length; at += 1) {
    const byte = body[at] as number;
    if (byte >= DIGIT_0 && byte <= DIGIT_9) {
      digits += 1;
      if (digits > LONGEST_EXACT_RUN) return false;
      continue;
    }
    if (digits > 0 && AFTER_A_DIGIT.has(byte)) return false;
    digits = 0;
    if (byte === BACKSLASH) return false;
    if (byte !== QUOTE) continue;
    for (let key = 0; key < CONTRACT_KEYS.length; key += 1) {
      if (!spellsAt(body, at, CONTRACT_KEYS[key] as Buffer)) continue;
      // One bit per key: a second copy finds its bit set.
      if ((seen & (1 << key)) !== 0) return false;
      seen |= 1 << key;
      break;
    }
  }
  return true;
}

/** Charsets other than UTF-8 are refused rather than guessed (RFC 8259 §8.1). */
export function checkJsonMediaType(contentType: string): void {
  if (!contentType.includes(';')) return; // no parameters: the common case
  const params = contentType.split(';').slice(1);
  for (const param of params) {
    const [key = '', value = ''] = param.split('=').map((part) => part.trim().toLowerCase());
    if (key === 'charset' && value.replace(/^"|"$/g, '') !== 'utf-8') {
      throw new UnsupportedMediaTypeError(`charset ${value} is not supported; send JSON as UTF-8`);
    }
  }
}

/**
 * RFC 9110 §8.4.1: the server decodes no content coding, so a coded body (gzip, br, ...) is refused with 415 rather
 * than parsed as if its bytes were the JSON; Accept-Encoding tells the client what would do (RFC 9110 §15.5.16).
 */
export function checkContentEncoding(header: string | undefined): void {
  if (header === undefined) return;
  const codings = header
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
  if (codings.length > 0) {
    throw new UnsupportedMediaTypeError(`Content-Encoding ${codings.join(', ')} is not supported; send the body without a content coding`, {
      'accept-encoding': 'identity',
    });
  }
}

/**
 * Parses a JSON document exactly (see docs/design/write-path.md, "int64 without loss"). `subject` names the text in messages: a
 * request body here, a line of `plantstore import` there, which is otherwise parsed the very same way.
 */
export function parseJsonBody(body: Buffer, subject = 'request body'): ParsedJson {
  if (body.length === 0) throw new BadRequestError(`${subject} is empty; a JSON NewPlant is required`);
  if (!isUtf8(body)) throw new BadRequestError(`${subject} is not valid UTF-8`);
  const text = body.toString('utf8');
  if (readsExactly(body)) {
    try {
      return JSON.parse(text) as ParsedJson;
    } catch (error) {
      throw new BadRequestError(`${subject} is not valid JSON: ${(error as Error).message}`);
    }
  }
  return parseExact(text, subject);
}

function parseExact(text: string, subject: string): ParsedJson {
  try {
    const value = parseLossless(text, null, parseNumber);
    rejectDuplicateKeys(text, subject);
    rejectLoneSurrogates(value, subject);
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      const record = value as Record<string | symbol, unknown>;
      if (typeof record.id === 'bigint') record[EXACT_ID] = record.id;
    }
    return toPlainNumbers(value);
  } catch (error) {
    if (error instanceof BadRequestError) throw error;
    if (error instanceof RangeError) throw new BadRequestError(`${subject} is nested too deeply`);
    throw new BadRequestError(`${subject} is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Numbers that a double holds exactly stay numbers. Integers beyond that become bigints (exact); a huge one
 * becomes ±MAX_VALUE, still an integer to the schema, so the int64 range check names it. A fraction that a
 * double would round to an integer becomes NaN, so the schema reports it as not an integer.
 */
function parseNumber(literal: string): number | bigint {
  const asNumber = Number(literal);
  const exact = exactInteger(literal);
  switch (exact.kind) {
    case 'integer':
      return Number.isSafeInteger(asNumber) ? asNumber : exact.value;
    case 'huge':
      return exact.negative ? -Number.MAX_VALUE : Number.MAX_VALUE;
    case 'fraction':
      return Number.isInteger(asNumber) ? Number.NaN : asNumber;
  }
}

/**
 * Refuses an object that names a key twice, whatever the values (lossless-json refuses only differing ones, so
 * `{"name":"a","name":"a"}` would pass): what the second copy meant is a guess. Runs on text already parsed, so it only
 * has to tell keys from other strings; keys are compared decoded (`"n\u0061me"` is `"name"`).
 */
function rejectDuplicateKeys(text: string, subject: string): void {
  /** One entry per open container: the keys seen so far in an object, null in an array. */
  const open: Array<Set<string> | null> = [];
  let expectingKey = false;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index];
    if (char === '"') {
      let end = index + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const keys = open.at(-1);
      if (expectingKey && keys) {
        const key = JSON.parse(text.slice(index, end + 1)) as string;
        if (keys.has(key)) throw new BadRequestError(`${subject} is not valid JSON: Duplicate key '${key}' encountered at position ${index}`);
        keys.add(key);
        expectingKey = false;
      }
      index = end;
    } else if (char === '{') {
      open.push(new Set());
      expectingKey = true;
    } else if (char === '[') {
      open.push(null);
      expectingKey = false;
    } else if (char === '}' || char === ']') {
      open.pop();
    } else if (char === ',') {
      expectingKey = open.at(-1) != null;
    }
  }
}

function rejectLoneSurrogates(value: unknown, subject: string): void {
  if (typeof value === 'string') {
    if (!value.isWellFormed()) throw new BadRequestError(`${subject} contains a lone UTF-16 surrogate escape, which is not valid Unicode`);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      rejectLoneSurrogates(key, subject);
      rejectLoneSurrogates(inner, subject);
    }
  }
}

/** The schema validator sees numbers only; bigints (already kept in EXACT_ID where they matter) become doubles. */
function toPlainNumbers(value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    for (const key of Object.keys(record)) record[key] = toPlainNumbers(record[key]);
  }
  return value;
}

/**
 * The plant a schema-valid NewPlant body asks for, with its exact int64 id. The schema validator sees ids as doubles,
 * so it cannot tell 2^63 - 1 from 2^63; the exact value (kept beside the body by the parser) decides the range here.
 */
export function plantFromBody(body: NewPlantBody): Plant {
  const exact = (body as { [EXACT_ID]?: bigint })[EXACT_ID];
  const id = exact ?? (Number.isSafeInteger(body.id) ? BigInt(body.id) : undefined);
  if (id === undefined || !isInt64(id)) {
    throw new BadRequestError(`id must be an integer from ${INT64_MIN} to ${INT64_MAX} (int64)`);
  }
  return { id, name: body.name, tag: body.tag ?? null };
}
