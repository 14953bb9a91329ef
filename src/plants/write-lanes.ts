import { reservedForSingles, type SharedWriteState } from './write-bound.js';

/**
 * Batches of streams' creates that may wait in the queue at once, over every stream: enough that a batch is always
 * ready when a commit ends (PostgreSQL commits up to four at once), while lines waiting beyond that would only be
 * held in memory.
 */
const STREAM_BATCHES_QUEUED = 8;

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
  readonly #lanes: WriteLanes;
  /** Creates of this lane admitted and not yet handed to storage. */
  queued = 0;
  /** A place was admitted for the next create, not yet used. */
  reserved = false;
  /** Resolves the wait of a reserve() that could not be admitted at once. */
  grant: ((admitted: boolean) => void) | undefined;
  closed = false;

  constructor(lanes: WriteLanes) {
    this.#lanes = lanes;
  }

  /**
   * Holds a place in the queue for this stream's next create: undefined when it has one now, otherwise a promise
   * that resolves true once it has, or false if the lane was closed first (the stream stopped).
   */
  reserve(): Promise<boolean> | undefined {
    return this.#lanes.reserveFor(this);
  }

  /** The stream ends: a place held and not used goes back, and a wait in progress resolves false. */
  close(): void {
    this.#lanes.closeLane(this);
  }
}

/** The open lanes of one write queue: streams' share of its bound, and the lanes waiting for a place, in turn. */
export class WriteLanes {
  readonly #shared: SharedWriteState;
  readonly #queueLimit: number;
  readonly #batchLimit: number;
  readonly #reserve: number;
  /** Open lanes, among which streams' share of the queue is divided. */
  #lanes = 0;
  /** Lanes waiting for a place, in the order they asked: each is granted one place in turn. */
  #waitingLanes: WriteLane[] = [];
  #laneRetry: NodeJS.Timeout | undefined;

  constructor(shared: SharedWriteState, queueLimit: number, batchLimit: number) {
    this.#shared = shared;
    this.#queueLimit = queueLimit;
    this.#batchLimit = batchLimit;
    this.#reserve = reservedForSingles(queueLimit);
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
    this.grantWaiting();
    if (lane.grant === undefined && this.admitFor(lane)) {
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
      this.grantWaiting();
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
    this.grantWaiting();
  }

  /** Admits one create of `lane` if it is under its share and streams' part of the bound has room, counting it. */
  admitFor(lane: WriteLane): boolean {
    return lane.queued < this.#laneShare() && this.#shared.admit(this.#reserve);
  }

  /** What one open stream may have queued: streams' part of the bound, divided among them. */
  #laneShare(): number {
    // Streams together need no more queued than a few batches to keep the writer busy; more only holds memory.
    const streamsPart = Math.min(this.#queueLimit - this.#reserve, STREAM_BATCHES_QUEUED * this.#batchLimit);
    return Math.max(1, Math.floor(streamsPart / Math.max(1, this.#lanes)));
  }

  /** Grants waiting lanes a place each, in the order they asked, while there is room; lanes over their share wait on. */
  grantWaiting(): void {
    if (this.#waitingLanes.length === 0) return;
    for (let index = 0; index < this.#waitingLanes.length; ) {
      const lane = this.#waitingLanes[index] as WriteLane;
      if (!this.admitFor(lane)) {
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
        this.grantWaiting();
      }, LANE_RETRY_MS).unref();
    }
  }
}
