import { StorageUnavailableError } from '../storage/errors.js';
import type { CreateOutcome, PlantStore } from '../storage/plant-store.js';
import type { CommitPacing } from '../storage/store.js';
import type { Plant } from '../plant.js';

/** The bound on writes waiting for storage is reached: the write is refused at once, nothing was stored. */
export class WriteQueueFullError extends Error {
  constructor() {
    super('the write queue is full; retry shortly');
    this.name = 'WriteQueueFullError';
  }
}

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

/**
 * A commit costs the writer about the same CPU and one fsync whatever its size, so the fewer commits the cheaper each
 * create. The writer of an instance commits its own thread's creates and the batches the other threads hand over;
 * those arrive out of step, and committed as they came each would pay a commit. Gathering holds a commit, when the
 * writer is idle, until every thread that has creates admitted and not yet handed over has handed them over, or for
 * maxWaitMs at most.
 */
interface Gathering {
  /** Whether some thread whose source is not in `present` has creates admitted that it has not handed over yet. */
  coming(present: ReadonlySet<number>): boolean;
  /** The longest a commit is held after its first batch arrived. */
  readonly maxWaitMs: number;
  /** The source this queue's own creates count as (its thread's slot). */
  readonly ownSource: number;
}

/** The bound and the refusal memory of several write queues, one per worker thread of an instance. */
export interface SharedWriteState {
  /**
   * Admits one write if the writes waiting in every queue together (this one's `depth` included) are below
   * queueLimit − `reserve`, counting it; false, counting nothing, otherwise. Streams admit with a reserve, so that
   * the last part of the bound is always there for single creates and deletes.
   */
  admit(reserve?: number): boolean;
  /** Writes this queue admitted that no longer wait (a batch handed to storage, a delete answered). */
  release(count: number): void;
  /** When the latest batch to finish in any queue was refused by storage (Date.now()), or undefined. */
  refusedAt: number | undefined;
}

/**
 * How long a batch refused by storage (disk full, locked, unreachable) keeps the service unready when no batch has
 * committed since. It expires so that an instance taken out of rotation, and so sent no creates, becomes ready again
 * by itself once its heartbeat write succeeds; a create that is refused again restarts it.
 */
export const REFUSAL_MEMORY_MS = 5000;

/** One create admitted by this queue. */
interface Pending {
  readonly plant: Plant;
  readonly resolve: (outcome: CreateOutcome) => void;
  readonly reject: (error: unknown) => void;
  /** The stream it came from, whose share it counts against until it is handed to storage. */
  readonly lane?: WriteLane;
}

/**
 * The part of queueLimit streams never take: single creates and deletes are admitted while streams fill the rest.
 * A quarter leaves streams most of the queue (one stream needs no more than its window, 1024 lines, to keep
 * commits full) and single creates thousands of places.
 */
export function reservedForSingles(queueLimit: number): number {
  return Math.min(queueLimit - 1, Math.max(1, Math.floor(queueLimit / 4)));
}

/**
 * Batches of streams' creates that may wait in the queue at once, over every stream: enough that a batch is always
 * ready when a commit ends (PostgreSQL commits up to four at once), while lines waiting beyond that would only be
 * held in memory.
 */
const STREAM_BATCHES_QUEUED = 8;

/** Syncs that pass without a post-sync hold after one ended with the clients answered not back (WriteQueue's #afterSync). */
const HOLD_BACKOFF_SYNCS = 16;

/** A post-sync hold lasts this many times WRITE_SYNC_HOLD_MS at most, however steadily creates arrive meanwhile. */
const HOLD_LIMIT = 10;

/** While streams wait for room that other threads' queues hold, the bound is looked at again this often. */
const LANE_RETRY_MS = 5;

/**
 * One stream's way into the write queue (a streamed bulk create: src/http/ndjson.ts). Where a single create is
 * refused when the queue is full, a stream waits: `reserve()` answers at once when there is room, and otherwise a
 * promise that resolves once the queue has made room for this stream, in turn with the other waiting streams, so
 * the stream stops reading its socket meanwhile. A stream holds at most its fair share of what streams may take
 * (queueLimit less the part reserved for single creates, divided among the open streams), so twenty streams share
 * the queue as evenly as two.
 */
export class WriteLane {
  readonly #queue: WriteQueue;
  /** Creates of this lane admitted and not yet handed to storage. */
  queued = 0;
  /** A place was admitted for the next create, not yet used. */
  reserved = false;
  /** Resolves the wait of a reserve() that could not be admitted at once. */
  grant: ((admitted: boolean) => void) | undefined;
  closed = false;

  constructor(queue: WriteQueue) {
    this.#queue = queue;
  }

  /**
   * Holds a place in the queue for this stream's next create: undefined when it has one now, otherwise a promise
   * that resolves true once it has, or false if the lane was closed first (the stream stopped).
   */
  reserve(): Promise<boolean> | undefined {
    return this.#queue.reserveFor(this);
  }

  /** The stream ends: a place held and not used goes back, and a wait in progress resolves false. */
  close(): void {
    this.#queue.closeLane(this);
  }
}

/** A batch another thread's queue admitted and handed over (createBatch): it joins a transaction whole. */
interface Handed {
  /** Which thread handed it over (its slot). */
  readonly source: number;
  readonly plants: readonly Plant[];
  /** Each plant's traceparent (src/tracing/), when some plant of the batch was traced in its thread. */
  readonly traceparents: readonly (string | undefined)[] | undefined;
  readonly resolve: (outcomes: CreateOutcome[]) => void;
  readonly reject: (error: unknown) => void;
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
  #lanes = 0;
  /** Lanes waiting for a place, in the order they asked: each is granted one place in turn. */
  #waitingLanes: WriteLane[] = [];
  #laneRetry: NodeJS.Timeout | undefined;
  readonly #reserve: number;
  /** Creates of this queue's own waiting in #queue and #streamed (the rest are handed-over batches, admitted elsewhere). */
  #queuedCreates = 0;
  /** Rows waiting in #queue, own creates and handed-over batches alike. */
  #queuedRows = 0;
  /** Rows of the batches committed and not yet answered. */
  #inFlightRows = 0;
  /** After a sync returned (pacing): commit once this many rows wait, or when #postSyncTimer fires. */
  #postSyncTarget = 0;
  #postSyncTimer: NodeJS.Timeout | undefined;
  /** The post-sync hold's time is up: the commit is made at the next flush, whatever waits. */
  #postSyncExpired = false;
  /** Syncs still to pass without a hold, after a hold ended with the clients not back (#afterSync). */
  #holdBackoff = 0;
  #inFlight = 0;
  /** Deletes admitted and not yet answered (waiting for the store or running). */
  #operations = 0;
  #scheduled = false;
  #idleWaiters: Array<() => void> = [];
  readonly #shared: SharedWriteState;
  /** While a commit is held for gathering: ends the hold. */
  #holdTimer: NodeJS.Timeout | undefined;
  #holdExpired = false;

  constructor(plants: Pick<PlantStore, 'create' | 'delete'>, options: WriteQueueOptions) {
    this.#plants = plants;
    this.#options = options;
    this.#observer = options.observer ?? UNOBSERVED;
    this.#shared = options.shared ?? {
      admit: (reserve = 0) => this.depth < options.queueLimit - reserve,
      release: () => undefined,
      refusedAt: undefined,
    };
    this.#reserve = reservedForSingles(options.queueLimit);
    options.pacing?.afterSync(() => this.#afterSync());
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
   * A create: refused at once with WriteQueueFullError when the bound is reached. With `lane`, a stream's create, which
   * is never refused: it uses the place its lane's reserve() held (the stream waited for it).
   */
  create(plant: Plant, lane?: WriteLane): Promise<CreateOutcome> {
    if (lane) {
      if (!lane.reserved && !this.#admitFor(lane)) return Promise.reject(new WriteQueueFullError());
      lane.reserved = false;
      lane.queued += 1;
    } else if (!this.#shared.admit()) return Promise.reject(new WriteQueueFullError());
    this.#observer.queued?.(plant);
    return new Promise((resolve, reject) => {
      if (lane) this.#streamed.push({ plant, resolve, reject, lane });
      else this.#queue.push({ plant, resolve, reject });
      this.#queuedCreates += 1;
      this.#queuedRows += 1;
      this.#schedule();
    });
  }

  /** A stream's way into the queue; the stream closes it when it ends. */
  openLane(): WriteLane {
    this.#lanes += 1;
    return new WriteLane(this);
  }

  /** WriteLane.reserve(): a place now, or a turn among the waiting lanes. */
  reserveFor(lane: WriteLane): Promise<boolean> | undefined {
    if (lane.closed) return Promise.resolve(false);
    if (lane.reserved) return undefined;
    // Lanes waiting for room get it first; one waiting only because it is over its share holds no other back.
    this.#grantWaiting();
    if (lane.grant === undefined && this.#admitFor(lane)) {
      lane.reserved = true;
      return undefined;
    }
    if (lane.grant !== undefined) return new Promise((resolve) => {
      const earlier = lane.grant as (admitted: boolean) => void;
      lane.grant = (admitted) => {
        earlier(admitted);
        resolve(admitted);
      };
    });
    return new Promise((resolve) => {
      lane.grant = resolve;
      this.#waitingLanes.push(lane);
      this.#grantWaiting();
    });
  }

  /** WriteLane.close(). */
  closeLane(lane: WriteLane): void {
    if (lane.closed) return;
    lane.closed = true;
    this.#lanes -= 1;
    if (lane.reserved) {
      lane.reserved = false;
      this.#shared.release(1);
    }
    const waiting = this.#waitingLanes.indexOf(lane);
    if (waiting !== -1) this.#waitingLanes.splice(waiting, 1);
    lane.grant?.(false);
    lane.grant = undefined;
    // One stream fewer: the others' share grows.
    this.#grantWaiting();
  }

  /** Admits one create of `lane` if it is under its share and streams' part of the bound has room, counting it. */
  #admitFor(lane: WriteLane): boolean {
    return lane.queued < this.#laneShare() && this.#shared.admit(this.#reserve);
  }

  /** What one open stream may have queued: streams' part of the bound, divided among them. */
  #laneShare(): number {
    // Streams together need no more queued than a few batches to keep the writer busy; more only holds memory.
    const streamsPart = Math.min(this.#options.queueLimit - this.#reserve, STREAM_BATCHES_QUEUED * this.#options.batchLimit);
    return Math.max(1, Math.floor(streamsPart / Math.max(1, this.#lanes)));
  }

  /** Grants waiting lanes a place each, in the order they asked, while there is room; lanes over their share wait on. */
  #grantWaiting(): void {
    if (this.#waitingLanes.length === 0) return;
    for (let index = 0; index < this.#waitingLanes.length; ) {
      const lane = this.#waitingLanes[index] as WriteLane;
      if (!this.#admitFor(lane)) {
        // Under its share but no room: no lane after it gets in either. Over its share: the next may.
        if (lane.queued < this.#laneShare()) break;
        index += 1;
        continue;
      }
      this.#waitingLanes.splice(index, 1);
      lane.reserved = true;
      const grant = lane.grant;
      lane.grant = undefined;
      grant?.(true);
    }
    // The room may be held by other threads' queues (WORKERS > 1), which release it without telling this one.
    if (this.#waitingLanes.length > 0 && this.#laneRetry === undefined) {
      this.#laneRetry = setTimeout(() => {
        this.#laneRetry = undefined;
        this.#grantWaiting();
      }, LANE_RETRY_MS).unref();
    }
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
      this.#grantWaiting();
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
      if (this.#inFlight === 0 && this.#holding()) return;
      // Held until the sync in flight returns (pacing's afterSync schedules a flush then); an idle store commits at once.
      if (this.#inFlight > 0 && syncing) return;
      if (this.#heldAfterSync()) return;
      const { batchLimit } = this.#options;
      let rows = 0;
      let creates = 0;
      let taken = 0;
      for (; taken < this.#queue.length; taken += 1) {
        const entry = this.#queue[taken] as Entry;
        const size = 'plant' in entry ? 1 : entry.plants.length;
        if (taken > 0 && rows + size > batchLimit) break;
        rows += size;
        if ('plant' in entry) creates += 1;
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
        this.#grantWaiting();
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

  /**
   * A sync just returned (pacing): the batches it covered are about to be answered, and their clients, most of them,
   * send again within a round trip. Committing what waits at once would leave those for the next sync and split the
   * clients into two halves, each answered every other sync: twice the commits and syncs, each of which costs the
   * core about as much whatever its size (docs/benchmarks.md, "Figures other pages rest on"). So the
   * commit waits until most of as many rows wait as are being answered (three quarters, not to wait for stragglers;
   * with those already waiting, up to the batch limit), or until postSyncHoldMs passes with none arriving. A hold
   * that ends by its time (the clients answered did not send again: not a closed loop) stops holding for the next
   * HOLD_BACKOFF_SYNCS syncs, so
   * that such traffic pays the wait once in that many syncs at most. Either way the commit is made in the loop's check
   * phase (setImmediate), not here: the sync's return is one of the events of a poll phase, and requests read later in
   * that same phase would otherwise miss the commit, and the sync, by a few microseconds.
   */
  #afterSync(): void {
    const { pacing, postSyncHoldMs = 0 } = this.#options;
    if (this.#queuedRows === 0 && this.#inFlightRows === 0) return;
    if (this.#holdBackoff > 0) this.#holdBackoff -= 1;
    if (pacing === undefined || postSyncHoldMs === 0 || this.#holdBackoff > 0 || this.#inFlightRows === 0) {
      if (this.#queuedRows > 0) this.#schedule();
      return;
    }
    this.#postSyncTarget = Math.min(this.#options.batchLimit, this.#queuedRows + Math.ceil((this.#inFlightRows * 3) / 4));
    clearTimeout(this.#postSyncTimer);
    this.#postSyncExpired = false;
    this.#armPostSyncTimer(postSyncHoldMs);
    if (this.#queuedRows > 0) this.#schedule();
  }

  /**
   * The hold ends once postSyncHoldMs passes with no create arriving, not postSyncHoldMs after the sync: the loop
   * parses the clients' requests one by one (tens of microseconds each, so 25 of them take about a millisecond of the
   * core), and while they are still coming in the clients are back. HOLD_LIMIT times postSyncHoldMs bounds it all.
   */
  #armPostSyncTimer(holdMs: number, round = 1): void {
    const seen = this.#queuedRows;
    this.#postSyncTimer = setTimeout(() => {
      this.#postSyncTimer = undefined;
      if (this.#queuedRows > seen && round < HOLD_LIMIT) {
        this.#armPostSyncTimer(holdMs, round + 1);
        return;
      }
      // Decided in #flush, after the loop's next poll: timers run before it, and on a busy core the clients' requests
      // may be waiting unread when the hold's time is up.
      this.#postSyncExpired = true;
      this.#schedule();
    }, holdMs);
  }

  /** True while the commit waits for the clients a sync's answers release (#afterSync); ends the wait once they came. */
  #heldAfterSync(): boolean {
    if (this.#postSyncTarget === 0) return false;
    if (this.#queuedRows < this.#postSyncTarget) {
      if (!this.#postSyncExpired) return true;
      this.#holdBackoff = HOLD_BACKOFF_SYNCS;
    }
    this.#postSyncTarget = 0;
    clearTimeout(this.#postSyncTimer);
    this.#postSyncTimer = undefined;
    return false;
  }

  /** True while the commit waits for other threads' batches (Gathering); arms the hold's end the first time. */
  #holding(): boolean {
    const { gathering } = this.#options;
    if (gathering === undefined || this.#holdExpired) return this.#endHold();
    let rows = this.#streamed.length;
    const present = new Set<number>([gathering.ownSource]);
    for (const entry of this.#queue) {
      if ('plant' in entry) rows += 1;
      else {
        rows += entry.plants.length;
        present.add(entry.source);
      }
    }
    if (rows >= this.#options.batchLimit || !gathering.coming(present)) return this.#endHold();
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

  #wakeIfIdle(): void {
    if (this.backlog === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
  }

  async #commit(batch: Entry[], rows: number): Promise<void> {
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
