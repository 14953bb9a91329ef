import { BadRequestError, ConflictError } from '../errors.js';
import { INT64_MAX, INT64_MIN, isInt64 } from '../int64.js';
import { EXACT_ID } from '../http/json-body.js';
import type { NewPlantBody, PlantBody } from '../schemas.js';
import type { GroupCommitter } from '../storage/group-commit.js';
import type { StoredPlant } from '../storage/store.js';

/** The API's Plant: `tag` only when the plant has one, and never the id. */
export function toPlant(stored: StoredPlant): PlantBody {
  return stored.tag === null ? { name: stored.name } : { name: stored.name, tag: stored.tag };
}

/**
 * The exact int64 id of a schema-valid NewPlant. The schema validator sees ids as doubles, so it cannot tell
 * 2^63 - 1 from 2^63; the exact value decides the range here.
 */
export function exactId(body: NewPlantBody): bigint {
  const exact = (body as { [EXACT_ID]?: bigint })[EXACT_ID];
  const id = exact ?? (Number.isSafeInteger(body.id) ? BigInt(body.id) : undefined);
  if (id === undefined || !isInt64(id)) {
    throw new BadRequestError(`id must be an integer from ${INT64_MIN} to ${INT64_MAX} (int64)`);
  }
  return id;
}

export class PlantService {
  readonly #writes: GroupCommitter;

  constructor(writes: GroupCommitter) {
    this.#writes = writes;
  }

  /** Creating what is already stored, identically, is a replay and succeeds, so clients may retry safely. */
  async create(body: NewPlantBody): Promise<PlantBody> {
    const plant: StoredPlant = { id: exactId(body), name: body.name, tag: body.tag ?? null };
    const outcome = await this.#writes.create(plant);
    switch (outcome.status) {
      case 'created':
        return toPlant(plant);
      case 'exists':
        if (outcome.stored.name === plant.name && outcome.stored.tag === plant.tag) return toPlant(outcome.stored);
        throw new ConflictError(`a plant with id ${plant.id} already exists with a different name or tag`);
      case 'failed':
        throw outcome.error;
    }
  }
}
