/**
 * A plant as the domain knows it: the exact int64 id, the name, and the tag or null when it has none. One shape for a
 * plant to create, a plant stored and a plant the domain answers with. A leaf module of a plain type: it imports
 * nothing, so every layer may import it, storage included (eslint.config.js), and it sits in no layer's folder, so
 * storage importing it makes no circle between folders (test/unit/import-circles.test.ts). The HTTP shapes are the
 * API's own (src/schemas.ts: PlantBody, NewPlantBody, StoredPlantBody), converted at the edge.
 */
export interface Plant {
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}
