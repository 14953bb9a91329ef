import type { CreateOutcome } from '../storage/plant-store.js';
import type { Plant } from '../plant.js';

/**
 * A commit costs the writer about the same CPU and one fsync whatever its size, so the fewer commits the cheaper each
 * create. The writer of an instance commits its own thread's creates and the batches the other threads hand over;
 * those arrive out of step, and committed as they came each would pay a commit. Gathering holds a commit, when the
 * writer is idle, until every thread that has creates admitted and not yet handed over has handed them over, or for
 * maxWaitMs at most.
 */
export interface Gathering {
  /** Whether some thread whose source is not in `present` has creates admitted that it has not handed over yet. */
  coming(present: ReadonlySet<number>): boolean;
  /** The longest a commit is held after its first batch arrived. */
  readonly maxWaitMs: number;
  /** The source this queue's own creates count as (its thread's slot). */
  readonly ownSource: number;
}

/** A batch another thread's queue admitted and handed over (createBatch): it joins a transaction whole. */
export interface Handed {
  /** Which thread handed it over (its slot). */
  readonly source: number;
  readonly plants: readonly Plant[];
  /** Each plant's traceparent (src/tracing/), when some plant of the batch was traced in its thread. */
  readonly traceparents: readonly (string | undefined)[] | undefined;
  readonly resolve: (outcomes: CreateOutcome[]) => void;
  readonly reject: (error: unknown) => void;
}

/** The hold of a write queue's commit while other threads' batches are on their way (Gathering). */
export class GatheringHold {
  readonly #gathering: Gathering | undefined;
  readonly #schedule: () => void;
  /** While a commit is held for gathering: ends the hold. */
  #holdTimer: NodeJS.Timeout | undefined;
  #holdExpired = false;

  /** `schedule` flushes the queue again, once the hold's time is up. */
  constructor(gathering: Gathering | undefined, schedule: () => void) {
    this.#gathering = gathering;
    this.#schedule = schedule;
  }

  /**
   * True while the commit waits for other threads' batches, given what waits in the queue (its own creates and the
   * batches handed over) and its streams' creates; arms the hold's end the first time.
   */
  holding(queue: ReadonlyArray<{ readonly plant: Plant } | Handed>, streamed: number, batchLimit: number): boolean {
    const gathering = this.#gathering;
    if (gathering === undefined || this.#holdExpired) return this.#endHold();
    let rows = streamed;
    const present = new Set<number>([gathering.ownSource]);
    for (const entry of queue) {
      if ('plant' in entry) rows += 1;
      else {
        rows += entry.plants.length;
        present.add(entry.source);
      }
    }
    if (rows >= batchLimit || !gathering.coming(present)) return this.#endHold();
    this.#holdTimer ??= setTimeout(() => {
      this.#holdExpired = true;
      this.#schedule();
    }, gathering.maxWaitMs);
    return true;
  }

  #endHold(): false {
    if (this.#holdTimer !== undefined) clearTimeout(this.#holdTimer);
    this.#holdTimer = undefined;
    this.#holdExpired = false;
    return false;
  }
}

/**
 * The rows of a transaction, own creates and handed-over batches flattened in order (`rows` of them), and each
 * row's traceparent when some handed-over batch was traced.
 */
export function batchRows(
  batch: ReadonlyArray<{ readonly plant: Plant } | Handed>,
  rows: number,
): { plants: Plant[]; traceparents: (string | undefined)[] | undefined } {
  let plants: Plant[];
  // Only a batch that holds a traced handed-over batch pays for an array of traceparents.
  let traceparents: (string | undefined)[] | undefined;
  if (rows === batch.length) plants = batch.map((entry) => ('plant' in entry ? entry.plant : (entry.plants[0] as Plant)));
  else {
    plants = new Array<Plant>(rows);
    let at = 0;
    for (const entry of batch) {
      if ('plant' in entry) plants[at++] = entry.plant;
      else for (const plant of entry.plants) plants[at++] = plant;
    }
  }
  let row = 0;
  for (const entry of batch) {
    if ('plant' in entry) row += 1;
    else {
      if (entry.traceparents !== undefined) {
        traceparents ??= new Array<string | undefined>(rows).fill(undefined);
        for (let index = 0; index < entry.plants.length; index += 1) traceparents[row + index] = entry.traceparents[index];
      }
      row += entry.plants.length;
    }
  }
  return { plants, traceparents };
}
