import { INT64_MAX, INT64_MIN } from '../json/int64.js';
import type { Plant } from '../plant.js';

/** A plants row as both databases' drivers return it (ids as bigint on both). */
export interface PlantRow {
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}

export function toPlant(row: PlantRow): Plant {
  return { id: row.id, name: row.name, tag: row.tag };
}

/**
 * The lowest id of the keyset page after `after`, so that every page, the first included, is one `id >= from`
 * range scan without leaving int64; undefined when nothing can follow (`after` is the largest int64).
 */
export function keysetFrom(after: bigint | undefined): bigint | undefined {
  if (after === INT64_MAX) return undefined;
  return after === undefined ? INT64_MIN : after + 1n;
}
