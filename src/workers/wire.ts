/**
 * How a batch of creates and its answers cross between a worker thread and the instance's writer (the main thread)
 * in one message each way. A message is copied by structured clone, whose cost grows with the values in it: an array
 * of plant objects pays for every object and every key, so a batch travels as three values whatever its size (the
 * ids in a BigInt64Array, every name and tag in one string, their lengths in an Int32Array), and the usual answer,
 * every row created, as one number.
 */
import { StorageUnavailableError } from '../storage/errors.js';
import type { CreateOutcome } from '../storage/plant-store.js';
import type { Plant } from '../plant.js';

export interface PackedPlants {
  readonly ids: BigInt64Array;
  /** Per plant, the name's length, then the tag's (-1: no tag), in UTF-16 code units. */
  readonly lengths: Int32Array;
  /** Every name and tag, in order. */
  readonly text: string;
  /**
   * Per plant, the traceparent of its create (src/tracing/), null when it was not traced; absent when no plant of
   * the batch was, so an untraced batch travels as before.
   */
  readonly traceparents?: readonly (string | null)[];
}

export function packPlants(plants: readonly Plant[], traceparents?: readonly (string | undefined)[]): PackedPlants {
  const ids = new BigInt64Array(plants.length);
  const lengths = new Int32Array(plants.length * 2);
  const parts: string[] = [];
  for (let index = 0; index < plants.length; index += 1) {
    const plant = plants[index] as Plant;
    ids[index] = plant.id;
    lengths[2 * index] = plant.name.length;
    parts.push(plant.name);
    if (plant.tag === null) lengths[2 * index + 1] = -1;
    else {
      lengths[2 * index + 1] = plant.tag.length;
      parts.push(plant.tag);
    }
  }
  const text = parts.join('');
  if (traceparents === undefined || !traceparents.some((traceparent) => traceparent !== undefined)) return { ids, lengths, text };
  return { ids, lengths, text, traceparents: Array.from(traceparents, (traceparent) => traceparent ?? null) };
}

/** The traceparents packPlants carried, aligned with unpackPlants' plants; undefined when no plant was traced. */
export function unpackTraceparents(packed: PackedPlants): (string | undefined)[] | undefined {
  return packed.traceparents?.map((traceparent) => traceparent ?? undefined);
}

export function unpackPlants(packed: PackedPlants): Plant[] {
  const { ids, lengths, text } = packed;
  const plants: Plant[] = new Array(ids.length);
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
  /** The driver's code (ERR_SQLITE_ERROR, …), when it had one. */
  readonly code?: string;
  /** SQLite's extended result code (SQLITE_CONSTRAINT_CHECK, …), when it had one. */
  readonly errcode?: number;
  /** A StorageUnavailableError: answered 503, a retry later may work. */
  readonly unavailable: boolean;
}

export function toWireError(error: unknown): WireError {
  const cause = error instanceof Error ? error : new Error(String(error));
  const { code, errcode } = cause as { code?: unknown; errcode?: unknown };
  return {
    name: cause.name,
    message: cause.message,
    ...(typeof code === 'string' ? { code } : {}),
    ...(typeof errcode === 'number' ? { errcode } : {}),
    unavailable: cause instanceof StorageUnavailableError,
  };
}

/** The error again, of the class the edge maps to its answer (src/http/error-reply.ts). */
export function fromWireError(wire: WireError): Error {
  if (wire.unavailable) return new StorageUnavailableError(wire.message);
  const error = new Error(wire.message) as Error & { code?: string; errcode?: number };
  error.name = wire.name;
  if (wire.code !== undefined) error.code = wire.code;
  if (wire.errcode !== undefined) error.errcode = wire.errcode;
  return error;
}

/** Every row created (the answer to nearly every batch), or each row's outcome. */
export type PackedOutcomes =
  | number
  | {
      /** Per row: 0 created, 1 existing, 2 failed. */
      readonly kinds: Uint8Array;
      /** The stored plant of each row whose id was stored already, in order. */
      readonly stored: PackedPlants;
      /** The error of each row that failed, in order. */
      readonly errors: readonly WireError[];
    };

const CREATED = 0;
const EXISTING = 1;
const FAILED = 2;

export function packOutcomes(outcomes: readonly CreateOutcome[]): PackedOutcomes {
  if (outcomes.every((outcome) => outcome.kind === 'created')) return outcomes.length;
  const kinds = new Uint8Array(outcomes.length);
  const stored: Plant[] = [];
  const errors: WireError[] = [];
  outcomes.forEach((outcome, index) => {
    switch (outcome.kind) {
      case 'created':
        kinds[index] = CREATED;
        break;
      case 'existing':
        kinds[index] = EXISTING;
        stored.push(outcome.stored);
        break;
      case 'failed':
        kinds[index] = FAILED;
        errors.push(toWireError(outcome.error));
        break;
    }
  });
  return { kinds, stored: packPlants(stored), errors };
}

const CREATED_OUTCOME: CreateOutcome = Object.freeze({ kind: 'created' });

export function unpackOutcomes(packed: PackedOutcomes): CreateOutcome[] {
  if (typeof packed === 'number') return new Array<CreateOutcome>(packed).fill(CREATED_OUTCOME);
  const stored = unpackPlants(packed.stored);
  let nextStored = 0;
  let nextError = 0;
  return Array.from(packed.kinds, (kind): CreateOutcome => {
    if (kind === CREATED) return CREATED_OUTCOME;
    if (kind === EXISTING) return { kind: 'existing', stored: stored[nextStored++] as Plant };
    return { kind: 'failed', error: fromWireError(packed.errors[nextError++] as WireError) };
  });
}

/*
 * The checks of what crosses, run where a message enters a thread (./message-checks.ts): a value that fails one is
 * refused, never used as the type it claims. Each is linear in the batch and allocates nothing.
 */

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Whether `value` is a PackedPlants whose lengths cut its text exactly, with a traceparent (or null) per plant if any. */
export function isPackedPlants(value: unknown): value is PackedPlants {
  if (!isObject(value)) return false;
  const { ids, lengths, text, traceparents } = value;
  if (!(ids instanceof BigInt64Array) || !(lengths instanceof Int32Array) || typeof text !== 'string') return false;
  if (lengths.length !== 2 * ids.length) return false;
  let total = 0;
  for (let index = 0; index < lengths.length; index += 1) {
    const length = lengths[index] as number;
    // A name has a length; a tag has one, or -1 for none.
    if (length < (index % 2 === 0 ? 0 : -1)) return false;
    if (length > 0) total += length;
  }
  if (total !== text.length) return false;
  if (traceparents === undefined) return true;
  return Array.isArray(traceparents) && traceparents.length === ids.length && traceparents.every((traceparent) => traceparent === null || typeof traceparent === 'string');
}

export function isWireError(value: unknown): value is WireError {
  if (!isObject(value)) return false;
  const { name, message, code, errcode, unavailable } = value;
  return (
    typeof name === 'string' &&
    typeof message === 'string' &&
    (code === undefined || typeof code === 'string') &&
    (errcode === undefined || typeof errcode === 'number') &&
    typeof unavailable === 'boolean'
  );
}

/** Whether `value` is a PackedOutcomes: a count, or per row a known kind with one stored plant or error per row that needs one. */
export function isPackedOutcomes(value: unknown): value is PackedOutcomes {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0;
  if (!isObject(value)) return false;
  const { kinds, stored, errors } = value;
  if (!(kinds instanceof Uint8Array) || !isPackedPlants(stored) || !Array.isArray(errors) || !errors.every(isWireError)) return false;
  let existing = 0;
  let failed = 0;
  for (const kind of kinds) {
    if (kind === EXISTING) existing += 1;
    else if (kind === FAILED) failed += 1;
    else if (kind !== CREATED) return false;
  }
  return stored.ids.length === existing && errors.length === failed;
}
