/**
 * Ids the bench sends and prefills, all below 10^15 so that every body takes the service's common fast path
 * (an id of 16 or more digits takes the exact-parse path; that rare case is not what is measured here).
 *
 * sequential: prefilled rows are 1..N, load ids are N + seq (appends at the right edge of the b-tree).
 * random:     an id is hi * 2^25 + lo with hi a random 24-bit number. Prefilled rows have lo = 0; load requests
 *             have lo = seq (>= 1), which is unique within a bench invocation, so no two requests ever share an
 *             id and none hits a prefilled row, while every insert lands at a random place in the table.
 */
export type IdMode = 'sequential' | 'random';

const RANDOM_HI_BITS = 24;
export const RANDOM_HI_SPACE = 2 ** RANDOM_HI_BITS;
export const RANDOM_LO_SPACE = 2 ** 25;

export function loadId(mode: IdMode, offset: number, seq: number): number {
  if (mode === 'sequential') return offset + seq;
  if (seq < 1 || seq >= RANDOM_LO_SPACE) throw new RangeError(`sequence ${seq} is outside 1..2^25-1`);
  return Math.floor(Math.random() * RANDOM_HI_SPACE) * RANDOM_LO_SPACE + seq;
}

export function prefillRandomId(hi: number): number {
  return hi * RANDOM_LO_SPACE;
}
