/** A recording fake store and the instance writer's queue on it, for the tests of batches handed over by other threads. */
import type { CreateOutcome, PlantStore } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import { WriteQueue, type WriteQueueOptions } from '../../src/plants/write-queue.js';

export const plants = (from: number, count: number): Plant[] =>
  Array.from({ length: count }, (_, index) => ({ id: BigInt(from + index), name: `p${from + index}`, tag: null }));

/** Records each transaction; answers every row created, except ids already stored (replayed or conflict, as stored), or refuses. */
export class RecordingStore implements PlantStore {
  readonly transactions: Plant[][] = [];
  /** Per transaction, the traceparents the store was given (undefined: none). */
  readonly traceparents: Array<readonly (string | undefined)[] | undefined> = [];
  readonly stored = new Map<bigint, Plant>();
  committing = 0;
  mostAtOnce = 0;
  refuse: Error | undefined;

  async create(batch: readonly Plant[], traceparents?: readonly (string | undefined)[]): Promise<CreateOutcome[]> {
    this.traceparents.push(traceparents === undefined ? undefined : [...traceparents]);
    this.committing += 1;
    this.mostAtOnce = Math.max(this.mostAtOnce, this.committing);
    try {
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (this.refuse) throw this.refuse;
      this.transactions.push([...batch]);
      return batch.map((plant): CreateOutcome => {
        const stored = this.stored.get(plant.id);
        if (stored) return { kind: 'existing', stored };
        this.stored.set(plant.id, plant);
        return { kind: 'created' };
      });
    } finally {
      this.committing -= 1;
    }
  }

  get = () => Promise.resolve(undefined);
  list = () => Promise.resolve([]);
  delete = () => Promise.resolve(false);
}

/** The instance writer's queue: one batch committing at a time, as on SQLite. */
export const writerQueue = (store: PlantStore, options: Partial<WriteQueueOptions> & { readonly batchLimit: number }) =>
  new WriteQueue(store, { queueLimit: 1000, concurrency: 1, ...options });
