/**
 * Group commit across worker threads, on the main thread of a SQLite instance. Each worker batches its own creates
 * (its WriteQueue, one batch per event-loop turn) and hands the batch over in one message; here every batch that
 * arrived while the previous commit ran joins one transaction and one fsync, up to WRITE_BATCH_LIMIT rows, and each
 * worker is answered with its own rows' outcomes. Admission happened in the workers (their shared bound), so nothing
 * is refused here but by storage.
 */
import type { WriteQueueObserver } from '../plants/write-queue.js';
import type { CreateOutcome, Plant, PlantStore } from '../storage/plant-store.js';

const UNOBSERVED: WriteQueueObserver = { batchCommitted: () => undefined };

interface Pending {
  /** Which worker handed the batch over (its slot). */
  readonly source: number;
  readonly plants: readonly Plant[];
  readonly resolve: (outcomes: CreateOutcome[]) => void;
  readonly reject: (error: unknown) => void;
}

export interface BatchWriterOptions {
  /** Rows per transaction at most; a worker's batch is never split, so one larger than this commits alone. */
  readonly batchLimit: number;
  /** Told of every transaction the store answers: these are the instance's commits. */
  readonly observer?: WriteQueueObserver;
  /** Called after a transaction that created plants has committed (the webhook dispatcher looks for their events). */
  readonly onCreated?: () => void;
  /** Whether, and how long, a commit waits for the batches other workers are about to hand over. */
  readonly gathering?: Gathering;
}

/**
 * A commit costs the writer about the same CPU and one fsync whatever its size, so the fewer commits the cheaper each
 * create. One thread serving alone commits all that arrived during its previous commit and the HTTP work around it;
 * the writer of several workers would commit each worker's batch as it arrives, so workers' batches out of step
 * each pay a commit. Gathering holds a commit, when the writer is idle, until every worker that has creates
 * admitted and not yet handed over has handed them over, or for maxWaitMs at most.
 */
export interface Gathering {
  /** Whether some worker not in `present` has creates admitted that it has not handed over yet. */
  coming(present: ReadonlySet<number>): boolean;
  /** The longest a commit is held after its first batch arrived. */
  readonly maxWaitMs: number;
}

export class BatchWriter {
  readonly #plants: Pick<PlantStore, 'create'>;
  readonly #options: BatchWriterOptions;
  readonly #observer: WriteQueueObserver;
  #waiting: Pending[] = [];
  #committing = false;
  #scheduled = false;
  #idleWaiters: Array<() => void> = [];
  /** While a commit is held for gathering: ends the hold. */
  #holdTimer: NodeJS.Timeout | undefined;
  #holdExpired = false;

  constructor(plants: Pick<PlantStore, 'create'>, options: BatchWriterOptions) {
    this.#plants = plants;
    this.#options = options;
    this.#observer = options.observer ?? UNOBSERVED;
  }

  /** One worker's batch: resolves with its outcomes once the transaction holding it has committed. */
  write(plants: readonly Plant[], source = 0): Promise<CreateOutcome[]> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ source, plants, resolve, reject });
      this.#schedule();
    });
  }

  /** Resolves once every batch handed over so far is answered. */
  drain(): Promise<void> {
    if (!this.#committing && this.#waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #schedule(): void {
    if (this.#scheduled || this.#committing || this.#waiting.length === 0) return;
    this.#scheduled = true;
    // After the poll phase: every batch whose message arrived in this turn is waiting by then.
    setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    if (this.#committing || this.#waiting.length === 0) return;
    if (this.#holding()) return;
    let rows = 0;
    let taken = 0;
    while (taken < this.#waiting.length) {
      const next = (this.#waiting[taken] as Pending).plants.length;
      if (taken > 0 && rows + next > this.#options.batchLimit) break;
      rows += next;
      taken += 1;
    }
    const batches = this.#waiting.splice(0, taken);
    this.#committing = true;
    void this.#commit(batches, rows).finally(() => {
      this.#committing = false;
      if (this.#waiting.length === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
      this.#schedule();
    });
  };

  /** True while the commit waits for more workers' batches; arms the hold's end the first time. */
  #holding(): boolean {
    const { gathering } = this.#options;
    if (gathering === undefined || this.#holdExpired) return this.#endHold();
    let rows = 0;
    const present = new Set<number>();
    for (const batch of this.#waiting) {
      rows += batch.plants.length;
      present.add(batch.source);
    }
    if (rows >= this.#options.batchLimit || !gathering.coming(present)) return this.#endHold();
    this.#holdTimer ??= setTimeout(() => {
      this.#holdExpired = true;
      this.#schedule();
    }, gathering.maxWaitMs);
    return true;
  }

  #endHold(): false {
    clearTimeout(this.#holdTimer);
    this.#holdTimer = undefined;
    this.#holdExpired = false;
    return false;
  }

  async #commit(batches: readonly Pending[], rows: number): Promise<void> {
    const plants: Plant[] = new Array(rows);
    let at = 0;
    for (const batch of batches) for (const plant of batch.plants) plants[at++] = plant;
    let outcomes: CreateOutcome[];
    const started = performance.now();
    try {
      // A repeated id, within a batch or across two workers' batches, is created once and its later copies answered
      // as the first left it: the store holds to that (test/storage/storage-contract.test.ts).
      outcomes = await this.#plants.create(plants);
    } catch (error) {
      for (const batch of batches) batch.reject(error);
      return;
    }
    this.#observer.batchCommitted(rows, (performance.now() - started) / 1000);
    at = 0;
    for (const batch of batches) {
      batch.resolve(outcomes.slice(at, at + batch.plants.length));
      at += batch.plants.length;
    }
    if (this.#options.onCreated && outcomes.some((outcome) => outcome.kind === 'created')) this.#options.onCreated();
  }
}
