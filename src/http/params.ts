import { INT64_MAX, INT64_MIN, isInt64 } from '../json/int64.js';
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from '../schemas.js';
import { BadRequestError } from './errors.js';

/** Canonical decimal: one spelling per integer (no plus sign, no leading zeros, no -0). */
const CANONICAL_INTEGER = /^(0|-?[1-9][0-9]*)$/;

/**
 * The exact int64 a path or query parameter spells, or a 400 naming the parameter. Parameters arrive as text
 * and are never coerced by the validator, so the whole check is here.
 */
export function parseInt64Parameter(text: string, parameter: string): bigint {
  if (text.length <= 20 && CANONICAL_INTEGER.test(text)) {
    const value = BigInt(text);
    if (isInt64(value)) return value;
  }
  throw new BadRequestError(`${parameter} must be an integer from ${INT64_MIN} to ${INT64_MAX} (int64) in canonical decimal`);
}

/** A page size from 1 to MAX_PAGE_LIMIT, or a 400 naming the parameter. */
export function parseLimitParameter(text: string | undefined, parameter: string): number {
  if (text === undefined) return DEFAULT_PAGE_LIMIT;
  if (text.length <= 4 && CANONICAL_INTEGER.test(text)) {
    const value = Number(text);
    if (value >= 1 && value <= MAX_PAGE_LIMIT) return value;
  }
  throw new BadRequestError(`${parameter} must be an integer from 1 to ${MAX_PAGE_LIMIT} in canonical decimal (default ${DEFAULT_PAGE_LIMIT})`);
}
