import { StorageUnavailableError } from '../storage/errors.js';
import type { CreateOutcome, PlantStore } from '../storage/plant-store.js';
import type { CommitPacing } from '../storage/store.js';
import type { Plant } from '../plant.js';
import { batchRows, GatheringHold, type Gathering, type Handed } from './gathering.js';
import { SyncHold } from './sync-hold.js';
import { ownBound, REFUSAL_MEMORY_MS, WriteQueueFullError, type SharedWriteState } from './write-bound.js';
import { WriteLanes, type WriteLane } from './write-lanes.js';
import { WriterShares } from './writer-shares.js';

/** What the write queue reports (src/observability/metrics.ts implements it); called once per batch, so it must be cheap and never throw. */
export interface WriteQueueObserver {
  /** The store answered a batch of creates (committed, though single rows may have failed alone) and how long it took. */
  batchCommitted(rows: number, seconds: number): void;
  /** A create was admitted to the queue, in its caller's context (tracing starts the create's wait here). */
  queued?(plant: Plant): void;
}

const UNOBSERVED: WriteQueueObserver = { batchCommitted: () => undefined };

export interface WriteQueueOptions {
  /** Writes waiting for storage (creates queued, single writes waiting or running) before new ones are refused. */
  readonly queueLimit: number;
  /** Rows per transaction at most. */
  readonly batchLimit: number;
  /** Batches committing at once: 1 for a single-writer store, more for a server database. */
  readonly concurrency: number;
  /** Told of every batch the store answers. */
  readonly observer?: WriteQueueObserver;
  /** Called after a batch that created plants has committed (the webhook dispatcher looks for their events then). */
  readonly onCreated?: () => void;
  /**
   * Where the bound is kept and the latest refusal remembered when they are not this queue's alone: each worker
   * thread of an instance (src/workers/) has a queue, and the instance one bound and one readiness.
   */
  readonly shared?: SharedWriteState;
  /**
   * Whether, and how long, a commit waits for the batches other threads are about to hand over (createBatch): only
   * the writer of an instance of several threads gathers.
   */
  readonly gathering?: Gathering;
  /**
   * A store that syncs apart from its commits (SQLite): while a batch waits for a sync, the next is held in the queue
   * and committed when that sync returns, so each sync covers the one batch that gathered meanwhile.
   */
  readonly pacing?: CommitPacing;
  /**
   * With pacing: after a sync returns, how long the next commit waits for the clients just answered to send again
   * with none arriving (WRITE_SYNC_HOLD_MS; ten times that at most). 0 or absent: commit at once.
   */
  readonly postSyncHoldMs?: number;
}

/** One create admitted by this queue. */
interface Pending {
  readonly plant: Plant;
  readonly resolve: (outcome: CreateOutcome) => void;
  readonly reject: (error: unknown) => void;
  /** The stream it came from, whose share it counts against until it is handed to storage. */
  readonly lane?: WriteLane;
  /** The client whose share of the queue a single create counts against until it is handed to storage. */
  readonly writer?: string | undefined;
}

type Entry = Pending | Handed;

/**
 * Admission and batching of every write to plants: the one path a create or a delete takes to storage.
 *
 * Batching (group commit): every create that arrives in one event-loop turn joins one transaction and one fsync,
 * and each caller is answered only after that commit. One durable commit per request would cap throughput at the
 * disk's fsync rate; per turn it is paid once for the whole batch.
 *
 * Admission: it is the one bound on writes waiting for storage. Deletes are admitted under the same queueLimit,
 * counted alongside queued creates, so neither kind can grow a queue in front of storage without limit, and
 * `drain()` waits for both. Whoever creates the queue (src/services.ts) drains it before storage is closed. In a
 * thread of an instance the bound is the instance's (`shared`): every thread's queue counts against it.
 *
 * The one group commit of the service: on SQLite with WORKERS > 1 the main thread's queue is the instance's writer,
 * and each worker thread's queue hands its batch over to it (createBatch, one message per batch); batches that
 * arrive while a transaction commits join the next one with the main thread's own creates (src/workers/).
 */
export class WriteQueue {
  readonly #plants: Pick<PlantStore, 'create' | 'delete'>;
  readonly #options: WriteQueueOptions;
  readonly #observer: WriteQueueObserver;
  #queue: Entry[] = [];
  /**
   * Creates from streams (WriteLane), apart from #queue: a batch takes single creates and handed-over batches first
   * and fills the rest with these, so a single create is never behind a stream's lines.
   */
  #streamed: Pending[] = [];
  /** Open lanes, among which streams' share of the queue is divided. */
  readonly #lanes: WriteLanes;
  /** Creates of this queue's own waiting in #queue and #streamed (the rest are handed-over batches, admitted elsewhere). */
  #queuedCreates = 0;
  /** Rows waiting in #queue, own creates and handed-over batches alike. */
  #queuedRows = 0;
  /** Rows of the batches committed and not yet answered. */
  #inFlightRows = 0;
  /** After a sync returned (pacing): holds the next commit for the clients just answered. */
  readonly #syncHold: SyncHold;
  #inFlight = 0;
  /** Deletes admitted and not yet answered (waiting for the store or running). */
  #operations = 0;
  #scheduled = false;
  #idleWaiters: Array<() => void> = [];
  readonly #shared: SharedWriteState;
  /** Holds a commit for the batches other threads are about to hand over (gathering). */
  readonly #gatheringHold: GatheringHold;
  /** Single creates queued per writer: under contention none may take more than its share (WriterShares). */
  readonly #writers: WriterShares;
  readonly #depthOfAll = (): number => this.#shared.depth();

  constructor(plants: Pick<PlantStore, 'create' | 'delete'>, options: WriteQueueOptions) {
    this.#plants = plants;
    this.#options = options;
    this.#observer = options.observer ?? UNOBSERVED;
    this.#shared = options.shared ?? ownBound(() => this.depth, options.queueLimit);
    this.#lanes = new WriteLanes(this.#shared, options.queueLimit, options.batchLimit);
    this.#writers = new WriterShares(options.queueLimit);
    const schedule = () => this.#schedule();
    this.#syncHold = new SyncHold(options, { queuedRows: () => this.#queuedRows, inFlightRows: () => this.#inFlightRows, schedule });
    this.#gatheringHold = new GatheringHold(options.gathering, schedule);
    options.pacing?.afterSync(() => this.#syncHold.afterSync());
  }

  /** Creates waiting or committing now (batches count once each), plus deletes not yet answered. */
  get backlog(): number {
    return this.#queue.length + this.#streamed.length + this.#inFlight + this.#operations;
  }

  /** Writes waiting for storage, as counted against queueLimit: creates queued plus deletes waiting or running. */
  get depth(): number {
    return this.#queuedCreates + this.#operations;
  }

  /**
   * A create: refused at once with WriteQueueFullError when the bound is reached, or when `writer` (the client it
   * comes from, as its caller names clients) holds more than its share of a queue under contention (WriterShares).
   * With `lane`, a stream's create, which is never refused: it uses the place its lane's reserve() held (the stream
   * waited for it).
   */
  create(plant: Plant, lane?: WriteLane, writer?: string): Promise<CreateOutcome> {
    if (lane) {
      if (!lane.reserved && !this.#lanes.admitFor(lane)) return Promise.reject(new WriteQueueFullError());
      lane.reserved = false;
      lane.queued += 1;
    } else if (writer === undefined) {
      if (!this.#shared.admit()) return Promise.reject(new WriteQueueFullError());
    } else {
      if (!this.#writers.allows(writer, this.#depthOfAll) || !this.#shared.admit()) return Promise.reject(new WriteQueueFullError());
      this.#writers.add(writer);
    }
    this.#observer.queued?.(plant);
    return new Promise((resolve, reject) => {
      if (lane) this.#streamed.push({ plant, resolve, reject, lane });
      else this.#queue.push({ plant, resolve, reject, writer });
      this.#queuedCreates += 1;
      this.#queuedRows += 1;
      this.#schedule();
    });
  }

  /** A stream's way into the queue; the stream closes it when it ends. */
  openLane(): WriteLane {
    return this.#lanes.openLane();
  }

  /**
   * A batch of creates another thread's queue admitted (under the instance's shared bound) and hands over whole: it
   * joins the next transaction with whatever else waits, is never split (one larger than batchLimit commits alone),
   * and resolves with its own rows' outcomes once that transaction has committed. Not counted against queueLimit
   * here: its thread counted it. `traceparents`, aligned with `plants`, are those its thread's tracing derived: the
   * store is given them with the plants, so their webhook events continue the trace of the create that wrote them.
   */
  createBatch(plants: readonly Plant[], source: number, traceparents?: readonly (string | undefined)[]): Promise<CreateOutcome[]> {
    if (plants.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      this.#queue.push({ source, plants, traceparents, resolve, reject });
      this.#queuedRows += plants.length;
      this.#schedule();
    });
  }

  /**
   * A delete, admitted under the same bound as creates: refused at once with WriteQueueFullError when the writes
   * waiting for storage have reached queueLimit, otherwise counted until it settles. It is not batched; the store
   * commits it durably before it resolves. Resolves false when no plant had that id.
   */
  async delete(id: bigint): Promise<boolean> {
    if (!this.#shared.admit()) throw new WriteQueueFullError();
    this.#operations += 1;
    try {
      return await this.#plants.delete(id);
    } finally {
      this.#operations -= 1;
      this.#shared.release(1);
      this.#lanes.grantWaiting();
      this.#wakeIfIdle();
    }
  }

  /**
   * True while the latest batch to finish was refused by storage within REFUSAL_MEMORY_MS, whole or in part (some rows
   * answered 503 after others committed). A heartbeat write can
   * succeed where a batch cannot (on a full disk a one-row commit may fit in WAL space already allocated), so
   * readiness looks at both.
   */
  get refusedByStorageRecently(): boolean {
    const refusedAt = this.#shared.refusedAt;
    return refusedAt !== undefined && Date.now() - refusedAt < REFUSAL_MEMORY_MS;
  }

  /** Resolves once every write accepted so far (creates and deletes) has been answered. */
  drain(): Promise<void> {
    if (this.backlog === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#options.concurrency || (this.#queue.length === 0 && this.#streamed.length === 0)) return;
    this.#scheduled = true;
    // setImmediate runs after the poll phase, so every request parsed in this turn is already queued.
    setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    // Whether a sync was in flight before this flush: the batches committed below start one only once they all have.
    const syncing = this.#options.pacing?.syncing === true;
    while (this.#inFlight < this.#options.concurrency && (this.#queue.length > 0 || this.#streamed.length > 0)) {
      if (this.#inFlight === 0 && this.#gatheringHold.holding(this.#queue, this.#streamed.length, this.#options.batchLimit)) return;
      // Held until the sync in flight returns (pacing's afterSync schedules a flush then); an idle store commits at once.
      if (this.#inFlight > 0 && syncing) return;
      if (this.#syncHold.held()) return;
      const { batchLimit } = this.#options;
      let rows = 0;
      let creates = 0;
      let taken = 0;
      for (; taken < this.#queue.length; taken += 1) {
        const entry = this.#queue[taken] as Entry;
        const size = 'plant' in entry ? 1 : entry.plants.length;
        if (taken > 0 && rows + size > batchLimit) break;
        rows += size;
        if ('plant' in entry) {
          creates += 1;
          if (entry.writer !== undefined) this.#writers.remove(entry.writer);
        }
      }
      const batch = this.#queue.splice(0, taken);
      // Streams' creates fill what single creates and handed-over batches left of the batch.
      const streamed = Math.min(this.#streamed.length, Math.max(0, batchLimit - rows));
      if (streamed > 0) {
        for (const entry of this.#streamed.splice(0, streamed)) {
          batch.push(entry);
          (entry.lane as WriteLane).queued -= 1;
        }
        rows += streamed;
        creates += streamed;
      }
      this.#queuedCreates -= creates;
      this.#queuedRows -= rows;
      this.#inFlightRows += rows;
      if (creates > 0) {
        this.#shared.release(creates);
        this.#lanes.grantWaiting();
      }
      this.#inFlight += 1;
      void this.#commit(batch, rows).finally(() => {
        this.#inFlight -= 1;
        this.#inFlightRows -= rows;
        this.#wakeIfIdle();
        this.#schedule();
      });
    }
  };

  #wakeIfIdle(): void {
    if (this.backlog === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  async #commit(batch: Entry[], rows: number): Promise<void> {
    const { plants, traceparents } = batchRows(batch, rows);
    let outcomes: CreateOutcome[];
    const started = performance.now();
    try {
      // Clients may send one id twice in one turn, or two threads in one transaction: every store creates it once and
      // answers the later copies as the first left it (test/storage/storage-contract.test.ts holds both to that).
      // Own creates' traceparents are not here: the tracing wrapper of the store (src/tracing/) adds them.
      outcomes = await (traceparents === undefined ? this.#plants.create(plants) : this.#plants.create(plants, traceparents));
    } catch (error) {
      if (error instanceof StorageUnavailableError) this.#shared.refusedAt = Date.now();
      for (const entry of batch) entry.reject(error);
      return;
    }
    this.#observer.batchCommitted(rows, (performance.now() - started) / 1000);
    // A batch storage cut short (PostgreSQL: a later statement failed after earlier rows committed, and the rest were
    // answered 503) is refused as much as one refused whole: its committed first part does not make storage healthy.
    const cutShort = outcomes.some((outcome) => outcome.kind === 'failed' && outcome.error instanceof StorageUnavailableError);
    this.#shared.refusedAt = cutShort ? Date.now() : undefined;
    let at = 0;
    for (const entry of batch) {
      if ('plant' in entry) entry.resolve(outcomes[at++] as CreateOutcome);
      else {
        entry.resolve(outcomes.slice(at, at + entry.plants.length));
        at += entry.plants.length;
      }
    }
    if (this.#options.onCreated && outcomes.some((outcome) => outcome.kind === 'created')) this.#options.onCreated();
  }
}
