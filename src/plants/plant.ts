/**
 * A plant as the domain knows it: the exact int64 id, the name, and the tag or null when it has none. One shape for a
 * plant to create, a plant stored and a plant the domain answers with. A leaf module of plain types and rules: it
 * imports nothing, so every layer may import it, storage included (eslint.config.js). The HTTP shapes are the API's
 * own (src/schemas.ts: PlantBody, NewPlantBody, StoredPlantBody), converted at the edge.
 */
export interface Plant {
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}

/**
 * Whether a create of `wanted` where `stored` has its id is a replay (the same name and tag) rather than a conflict.
 * One rule for every way in: POST /plants, `plantstore import`, `plantstore copy`.
 */
export function isSamePlant(stored: Plant, wanted: Plant): boolean {
  return stored.id === wanted.id && stored.name === wanted.name && stored.tag === wanted.tag;
}
