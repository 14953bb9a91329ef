import { BadRequestError, ConflictError, NotFoundError } from '../errors.js';
import { INT64_MAX, INT64_MIN, isInt64 } from '../int64.js';
import { EXACT_ID } from '../http/json-body.js';
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, type NewPlantBody, type PlantBody } from '../schemas.js';
import type { GroupCommitter } from '../storage/group-commit.js';
import type { Store, StoredPlant } from '../storage/store.js';

/** The API's Plant: `tag` only when the plant has one, and never the id. */
export function toPlant(stored: StoredPlant): PlantBody {
  return stored.tag === null ? { name: stored.name } : { name: stored.name, tag: stored.tag };
}

/** A plant as the read operations answer it; the bigint id is written with all its digits by the serializer. */
export interface PlantRecord {
  readonly id: bigint;
  readonly name: string;
  readonly tag?: string;
}

export function toPlantRecord(stored: StoredPlant): PlantRecord {
  return stored.tag === null ? { id: stored.id, name: stored.name } : { id: stored.id, name: stored.name, tag: stored.tag };
}

/** One JSON object with the id as an exact JSON integer (JSON.stringify cannot write a bigint). */
export function plantRecordJson(stored: StoredPlant): string {
  const tag = stored.tag === null ? '' : `,"tag":${JSON.stringify(stored.tag)}`;
  return `{"id":${stored.id},"name":${JSON.stringify(stored.name)}${tag}}`;
}

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

export interface PlantPage {
  readonly plants: PlantRecord[];
  /** The cursor of the next page, when more plants remain. */
  readonly nextAfter?: bigint;
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
  readonly #store: Store;

  constructor(writes: GroupCommitter, store: Store) {
    this.#writes = writes;
    this.#store = store;
  }

  async get(id: bigint): Promise<PlantRecord> {
    const stored = await this.#store.getPlant(id);
    if (!stored) throw new NotFoundError(`no plant with id ${id}`);
    return toPlantRecord(stored);
  }

  /** One keyset page: one row more than asked for tells whether another page follows, without counting. */
  async list(query: { readonly limit: number; readonly after?: bigint; readonly tag?: string }): Promise<PlantPage> {
    const rows = await this.#store.listPlants({
      limit: query.limit + 1,
      ...(query.after === undefined ? {} : { after: query.after }),
      ...(query.tag === undefined ? {} : { tag: query.tag }),
    });
    const plants = rows.slice(0, query.limit).map(toPlantRecord);
    const last = plants.at(-1);
    return rows.length > query.limit && last ? { plants, nextAfter: last.id } : { plants };
  }

  /**
   * Deleted durably (the store commits before resolving); the id is free to be created again. The delete counts
   * against the write queue's bound, like a create: 503 at once when it is full.
   */
  async delete(id: bigint): Promise<void> {
    if (!(await this.#writes.run(() => this.#store.deletePlant(id)))) throw new NotFoundError(`no plant with id ${id}`);
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
