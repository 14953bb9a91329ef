/**
 * How a batch of creates and its answers cross between a worker thread and the instance's writer (the main thread)
 * in one message each way. A message is copied by structured clone, whose cost grows with the values in it: an array
 * of plant objects pays for every object and every key, so a batch travels as three values whatever its size (the
 * ids in a BigInt64Array, every name and tag in one string, their lengths in an Int32Array), and the usual answer,
 * every row created, as one number.
 */
import { StorageUnavailableError } from '../storage/errors.js';
import type { CreateOutcome, StoredPlant } from '../storage/store.js';

export interface PackedPlants {
  readonly ids: BigInt64Array;
  /** Per plant, the name's length, then the tag's (-1: no tag), in UTF-16 code units. */
  readonly lengths: Int32Array;
  /** Every name and tag, in order. */
  readonly text: string;
}

export function packPlants(plants: readonly StoredPlant[]): PackedPlants {
  const ids = new BigInt64Array(plants.length);
  const lengths = new Int32Array(plants.length * 2);
  const parts: string[] = [];
  for (let index = 0; index < plants.length; index += 1) {
    const plant = plants[index] as StoredPlant;
    ids[index] = plant.id;
    lengths[2 * index] = plant.name.length;
    parts.push(plant.name);
    if (plant.tag === null) lengths[2 * index + 1] = -1;
    else {
      lengths[2 * index + 1] = plant.tag.length;
      parts.push(plant.tag);
    }
  }
  return { ids, lengths, text: parts.join('') };
}

export function unpackPlants(packed: PackedPlants): StoredPlant[] {
  const { ids, lengths, text } = packed;
  const plants: StoredPlant[] = new Array(ids.length);
  let at = 0;
  for (let index = 0; index < ids.length; index += 1) {
    const nameLength = lengths[2 * index] as number;
    const name = text.slice(at, (at += nameLength));
    const tagLength = lengths[2 * index + 1] as number;
    const tag = tagLength < 0 ? null : text.slice(at, (at += tagLength));
    plants[index] = { id: ids[index] as bigint, name, tag };
  }
  return plants;
}

/** An error as it crosses a thread: structured clone keeps an Error's message but not its class, which decides its answer. */
export interface WireError {
  readonly name: string;
  readonly message: string;
  /** The driver's code (SQLITE_CONSTRAINT_CHECK, …), when it had one. */
  readonly code?: string;
  /** A StorageUnavailableError: answered 503, a retry later may work. */
  readonly unavailable: boolean;
}

export function toWireError(error: unknown): WireError {
  const cause = error instanceof Error ? error : new Error(String(error));
  const code = (cause as { code?: unknown }).code;
  return {
    name: cause.name,
    message: cause.message,
    ...(typeof code === 'string' ? { code } : {}),
    unavailable: cause instanceof StorageUnavailableError,
  };
}

/** The error again, of the class the edge maps to its answer (src/http/error-reply.ts). */
export function fromWireError(wire: WireError): Error {
  if (wire.unavailable) return new StorageUnavailableError(wire.message);
  const error = new Error(wire.message) as Error & { code?: string };
  error.name = wire.name;
  if (wire.code !== undefined) error.code = wire.code;
  return error;
}

/** Every row created (the answer to nearly every batch), or each row's outcome. */
export type PackedOutcomes =
  | number
  | {
      /** Per row: 0 created, 1 exists, 2 failed. */
      readonly statuses: Uint8Array;
      /** The stored plant of each row that exists, in order. */
      readonly stored: PackedPlants;
      /** The error of each row that failed, in order. */
      readonly errors: readonly WireError[];
    };

const CREATED = 0;
const EXISTS = 1;
const FAILED = 2;

export function packOutcomes(outcomes: readonly CreateOutcome[]): PackedOutcomes {
  if (outcomes.every((outcome) => outcome.status === 'created')) return outcomes.length;
  const statuses = new Uint8Array(outcomes.length);
  const stored: StoredPlant[] = [];
  const errors: WireError[] = [];
  outcomes.forEach((outcome, index) => {
    switch (outcome.status) {
      case 'created':
        statuses[index] = CREATED;
        break;
      case 'exists':
        statuses[index] = EXISTS;
        stored.push(outcome.stored);
        break;
      case 'failed':
        statuses[index] = FAILED;
        errors.push(toWireError(outcome.error));
        break;
    }
  });
  return { statuses, stored: packPlants(stored), errors };
}

const CREATED_OUTCOME: CreateOutcome = Object.freeze({ status: 'created' });

export function unpackOutcomes(packed: PackedOutcomes): CreateOutcome[] {
  if (typeof packed === 'number') return new Array<CreateOutcome>(packed).fill(CREATED_OUTCOME);
  const stored = unpackPlants(packed.stored);
  let nextStored = 0;
  let nextError = 0;
  return Array.from(packed.statuses, (status): CreateOutcome => {
    if (status === CREATED) return CREATED_OUTCOME;
    if (status === EXISTS) return { status: 'exists', stored: stored[nextStored++] as StoredPlant };
    return { status: 'failed', error: fromWireError(packed.errors[nextError++] as WireError) };
  });
}

