import type { Plant } from '../plant.js';

/**
 * The change log (`ServingStore.changes`): every create and delete of a plant, numbered by a sequence that is strictly
 * increasing in commit order within one database and written in the same transaction as the change itself, so a
 * change is in the log if and only if it happened. The feed (src/feed/, `GET /plants/events`) reads it; each database
 * implements it in one module (src/storage/sqlite/changes.ts, src/storage/postgres/changes.ts), held to the same rules
 * by test/storage/storage-contract.test.ts.
 */

/** One change as the log keeps it. */
export type PlantChange =
  | { readonly sequence: bigint; readonly kind: 'created'; readonly plant: Plant; readonly at: Date }
  | { readonly sequence: bigint; readonly kind: 'deleted'; readonly id: bigint; readonly at: Date };

/** What the feed reads. */
export interface ChangeLog {
  /** At most `limit` changes with a sequence greater than `sequence`, ascending. */
  changesAfter(sequence: bigint, limit: number): Promise<PlantChange[]>;
  /** The sequence of the newest change; 0n when the log is empty (pruning always keeps the newest, so that is never-written). */
  newestSequence(): Promise<bigint>;
  /** The sequence of the oldest change still kept; undefined when the log is empty. */
  oldestRetained(): Promise<bigint | undefined>;
  /**
   * Calls `listener` once as it starts listening (for whatever committed before), then once after each commit that
   * wrote changes, in this process (SQLite: the write path; PostgreSQL:
   * LISTEN on a connection of its own, so commits of every instance are heard); returns the function that stops it.
   * Absent where nothing can tell (a worker thread's SQLite store is told by its instance's writer instead).
   */
  onCommitted?(listener: () => void): () => void;
}

/** Pruning the log, by age and by count; run by one periodic task per process (src/feed/change-pruner.ts). */
export interface ChangeRetention {
  /** Deletes changes older than `maxAgeMs` or beyond the newest `maxCount`, never the newest; resolves with how many. */
  pruneChanges(maxAgeMs: number, maxCount: number): Promise<number>;
}

/**
 * The highest sequence pruning deletes up to (inclusive), or undefined for none: what is past the newest `maxCount`,
 * and what is older than the age limit (`newestExpired`, the newest sequence written before the cutoff), but never
 * the newest change, which is what tells a later reader where the log stands. Both databases prune by it.
 */
export function pruneThrough(newest: bigint, maxCount: number, newestExpired: bigint | undefined): bigint | undefined {
  if (newest === 0n) return undefined;
  let through = newest - BigInt(Math.max(1, maxCount));
  if (newestExpired !== undefined && newestExpired > through) through = newestExpired;
  if (through >= newest) through = newest - 1n;
  return through > 0n ? through : undefined;
}

/** A changes row as both drivers return it (integers as bigint). */
export interface ChangeRow {
  readonly seq: bigint;
  readonly kind: string;
  readonly plant_id: bigint;
  readonly name: string | null;
  readonly tag: string | null;
  readonly changed_at: Date;
}

export function toChange(row: ChangeRow): PlantChange {
  return row.kind === 'created'
    ? { sequence: row.seq, kind: 'created', plant: { id: row.plant_id, name: row.name ?? '', tag: row.tag }, at: row.changed_at }
    : { sequence: row.seq, kind: 'deleted', id: row.plant_id, at: row.changed_at };
}
