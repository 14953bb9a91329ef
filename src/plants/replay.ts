import type { Plant } from '../plant.js';

/**
 * Whether a create of `wanted` where `stored` has its id is a replay (the same name and tag) rather than a conflict.
 * One rule for every way in: POST /plants, `plantstore import`, `plantstore copy`.
 */
export function isSamePlant(stored: Plant, wanted: Plant): boolean {
  return stored.id === wanted.id && stored.name === wanted.name && stored.tag === wanted.tag;
}
