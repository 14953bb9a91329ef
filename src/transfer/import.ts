import { PlantConflictError } from '../plants/errors.js';
import type { CreateOutcome, PlantStore } from '../storage/plant-store.js';
import type { Plant } from '../plant.js';
import { isSamePlant } from '../plants/replay.js';
import { isBlank, type InputLine } from './lines.js';

export interface ImportCounts {
  /** Lines read, blank ones included. */
  lines: number;
  /** Plants stored by this run (with --dry-run: that would be). */
  created: number;
  /** Lines whose plant was stored already, identically: nothing to do. */
  identical: number;
  /** Lines whose id is stored with another name or tag: refused, like a 409. */
  conflicting: number;
  /** Lines that are not a valid NewPlant, or that storage refused alone. */
  invalid: number;
  /** Lines of whitespace only: skipped. */
  blank: number;
}

export interface ImportOptions {
  readonly store: Pick<PlantStore, 'create' | 'get'>;
  readonly lines: AsyncIterable<InputLine[]>;
  /** One line's text to the plant it asks for, validated exactly as POST /plants validates a body; throws naming the problem. */
  readonly readPlant: (text: Buffer) => Plant;
  /** BODY_LIMIT_BYTES: the longest line, named when one is longer. */
  readonly maxLineBytes: number;
  /** Lines per batch: valid ones are committed together, in one durable call to the plant store's create. */
  readonly batchSize: number;
  /** Read and compare with what is stored, write nothing. */
  readonly dryRun: boolean;
  /** A line that was not imported, and why; called in line order. */
  readonly onProblem: (line: number, reason: string) => void;
  /** After each batch. */
  readonly onProgress?: (counts: Readonly<ImportCounts>) => void;
}

/** Storage refused a whole batch (unavailable, locked too long): lines before `line` are committed, this one on are not. */
export class ImportStoppedError extends Error {
  constructor(
    readonly line: number,
    cause: unknown,
  ) {
    super(
      `import stopped at line ${line}: ${(cause as Error).message ?? String(cause)}; every plant before that line is committed, ` +
        'and running the same import again finishes the job (identical plants are skipped)',
      { cause },
    );
    this.name = 'ImportStoppedError';
  }
}

type Entry = { readonly line: number; readonly plant: Plant } | { readonly line: number; readonly problem: string };

/**
 * Imports JSON lines of NewPlant. Each line is validated alone (an invalid line is reported and never reaches storage,
 * so it cannot be partly written); valid ones are committed in batches through the plant store's create, which is durable and
 * answers each row: created, or already there (identical: skipped; different: a conflict, reported). Reports and
 * counts come in line order. Memory holds one batch, whatever the input's size.
 */
export async function importPlants(options: ImportOptions): Promise<ImportCounts> {
  const { store, readPlant, dryRun, onProblem } = options;
  const counts: ImportCounts = { lines: 0, created: 0, identical: 0, conflicting: 0, invalid: 0, blank: 0 };
  let batch: Entry[] = [];

  const flush = async () => {
    const entries = batch;
    batch = [];
    const plants = entries.flatMap((entry) => ('plant' in entry ? [entry.plant] : []));
    let outcomes: CreateOutcome[] = [];
    if (plants.length > 0) {
      try {
        outcomes = dryRun ? await compareWithStored(store, plants) : await store.create(plants);
      } catch (error) {
        throw new ImportStoppedError((entries.find((entry) => 'plant' in entry) as Entry).line, error);
      }
    }
    let next = 0;
    for (const entry of entries) {
      if (!('plant' in entry)) {
        counts.invalid += 1;
        onProblem(entry.line, entry.problem);
        continue;
      }
      const outcome = outcomes[next] as CreateOutcome;
      next += 1;
      switch (outcome.kind) {
        case 'created':
          counts.created += 1;
          break;
        case 'existing':
          if (isSamePlant(outcome.stored, entry.plant)) {
            counts.identical += 1;
          } else {
            counts.conflicting += 1;
            onProblem(entry.line, new PlantConflictError(entry.plant.id).message);
          }
          break;
        case 'failed':
          counts.invalid += 1;
          onProblem(entry.line, `storage refused this plant: ${outcome.error.message}`);
          break;
      }
    }
    options.onProgress?.(counts);
  };

  for await (const lines of options.lines) {
    for (const line of lines) {
      counts.lines += 1;
      if ('tooLongBytes' in line) {
        batch.push({ line: line.number, problem: `plant is longer than the limit of ${options.maxLineBytes} bytes (BODY_LIMIT_BYTES)` });
      } else if (isBlank(line.text)) {
        counts.blank += 1;
      } else {
        try {
          batch.push({ line: line.number, plant: readPlant(line.text) });
        } catch (error) {
          batch.push({ line: line.number, problem: (error as Error).message });
        }
      }
      // Problems count toward the batch too, so a file of nothing but bad lines still reports as it goes.
      if (batch.length >= options.batchSize) await flush();
    }
  }
  if (batch.length > 0) await flush();
  return counts;
}

/**
 * What the plant store's create would answer, read without writing: each plant's id looked up. It cannot see a line
 * that repeats an id of an earlier line of the same input, which a real import would compare with that earlier line.
 */
async function compareWithStored(store: Pick<PlantStore, 'get'>, plants: readonly Plant[]): Promise<CreateOutcome[]> {
  const stored = await Promise.all(plants.map((plant) => store.get(plant.id)));
  return stored.map((row): CreateOutcome => (row === undefined ? { kind: 'created' } : { kind: 'existing', stored: row }));
}
