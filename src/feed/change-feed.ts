import type { ChangeLog, PlantChange } from '../storage/change-store.js';

/**
 * The change feed of one event loop: it follows the change log (src/storage/change-store.ts) and fans every new
 * change out to the loop's live streams (`GET /plants/events`). However many streams are open, the log is read once
 * per wake-up: a commit heard from storage (SQLite: the write path; PostgreSQL: LISTEN), a wake() from outside (a
 * worker thread is told by its instance's writer), or the slow fallback poll, for a wake-up lost on the way. Each
 * change is rendered and encoded once, into a buffer every stream writes a view of. A read takes the log a page
 * (`batchSize` changes) at a time, and each page is one write to each stream, however many commits it covers.
 */

/**
 * The changes of one read of the log, as every live stream receives them: their events encoded once into one shared
 * buffer, so that a stream's write is a view of it (no copy, no encoding per stream).
 */
export class FeedBatch {
  /** The sequences of the changes, ascending. */
  readonly sequences: readonly bigint[];
  /** Where each change's event starts in `bytes`. */
  readonly starts: readonly number[];
  readonly bytes: Buffer;

  constructor(sequences: readonly bigint[], events: readonly string[]) {
    this.sequences = sequences;
    const starts: number[] = [];
    let length = 0;
    for (const event of events) {
      starts.push(length);
      length += Buffer.byteLength(event);
    }
    this.starts = starts;
    this.bytes = Buffer.from(events.join(''));
  }

  get last(): bigint {
    return this.sequences.at(-1) as bigint;
  }

  /** The events of the changes after `cursor`, as a view of the shared buffer, and how many; undefined when none. */
  after(cursor: bigint): { readonly bytes: Buffer; readonly count: number } | undefined {
    // Live streams are all at the position the batch was read after: every change is theirs, in one comparison.
    if (cursor < (this.sequences[0] as bigint)) return { bytes: this.bytes, count: this.sequences.length };
    let low = 0;
    let high = this.sequences.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((this.sequences[middle] as bigint) <= cursor) low = middle + 1;
      else high = middle;
    }
    if (low === this.sequences.length) return undefined;
    return { bytes: this.bytes.subarray(this.starts[low]), count: this.sequences.length - low };
  }
}

/** A live stream: handed every batch the feed reads, in order. It skips the changes up to its own cursor. */
export interface FeedSubscriber {
  deliver(batch: FeedBatch): void;
}

/** What the feed reports (src/observability/metrics.ts implements it). */
export interface FeedObserver {
  readonly streamOpened: () => void;
  readonly streamClosed: (why: StreamEnd) => void;
  /** One write to a stream's socket, carrying `count` change events. */
  readonly eventsSent: (count: number) => void;
  readonly resetSent: () => void;
}

/**
 * Why a stream ended: the client left, it did not read (its buffer passed the bound), the server is shutting down,
 * storage failed mid-stream, or its token was refused (revoked, expired, without the scope).
 */
export type StreamEnd = 'client' | 'slow' | 'shutdown' | 'error' | 'refused';

export interface ChangeFeedOptions {
  /** A change's event, as every stream writes it: made once per change. */
  readonly render: (change: PlantChange) => string;
  /** Changes read per query, for the live fan-out and for each stream's backlog. */
  readonly batchSize: number;
  /** The fallback poll, for a wake-up lost on the way (the LISTEN connection lost, a message dropped). */
  readonly pollMs: number;
  /**
   * The share of the event loop the fan-out may take while commits keep coming: after a read that took t ms to hand
   * out, the next waits t × (1 / share - 1) ms, so the changes of the commits in between go out together, in one write
   * per stream. With few streams a read takes microseconds and each commit goes out at once; with many, the writes per
   * second stay bounded however fast commits come, and the event loop that commits keeps most of its time.
   */
  readonly loopShare: number;
  /** The longest a read waits for `loopShare`: what bounds the time from a commit to its event at every stream. */
  readonly maxIntervalMs: number;
  /** A read that failed; the next wake-up or poll tries again. */
  readonly onError: (error: unknown) => void;
}

/**
 * The longest the fan-out writes without letting the event loop run: a write to a socket is a system call, so
 * a thousand streams take milliseconds, and in one piece they would hold up every create's answer and
 * the next commit for as long (BENCHMARKS.md, "Change feed").
 */
const HAND_OUT_SLICE_MS = 4;

export class ChangeFeed {
  readonly #log: ChangeLog;
  readonly #options: ChangeFeedOptions;
  readonly #subscribers = new Set<FeedSubscriber>();
  /** The newest sequence read and fanned out: every live stream has been handed everything up to it. */
  #position = 0n;
  #started: Promise<void> | undefined;
  #reading = false;
  #readAgain = false;
  #skipped = false;
  /** When the last read finished handing out its changes, and how long handing them out took. */
  #lastReadAt = -Infinity;
  #lastFanOutMs = 0;
  #waitTimer: NodeJS.Timeout | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #stopListening: (() => void) | undefined;
  #closed = false;

  constructor(log: ChangeLog, options: ChangeFeedOptions) {
    this.#log = log;
    this.#options = options;
  }

  get log(): ChangeLog {
    return this.#log;
  }

  get batchSize(): number {
    return this.#options.batchSize;
  }

  /** The newest sequence fanned out to live streams. */
  get position(): bigint {
    return this.#position;
  }

  /** Starts following the log at its newest change; once, on the first stream (an instance with no stream reads nothing). */
  start(): Promise<void> {
    this.#started ??= (async () => {
      this.#position = await this.#log.newestSequence();
      if (this.#closed) return;
      this.#stopListening = this.#log.onCommitted?.(() => this.wake());
      this.#schedulePoll();
    })();
    return this.#started;
  }

  /** A stream that has caught up with `position` (no await between its check and this call) becomes live. */
  subscribe(subscriber: FeedSubscriber): () => void {
    this.#subscribers.add(subscriber);
    // Wake-ups that came while nobody listened were not read: read now (the new stream ignores what it has).
    if (this.#skipped) {
      this.#skipped = false;
      this.wake();
    }
    return () => this.#subscribers.delete(subscriber);
  }

  get subscribers(): number {
    return this.#subscribers.size;
  }

  /**
   * Something committed: read what is new, once, however many wake-ups come while a read runs or waits, and no
   * sooner than `loopShare` allows after the last read (at most `maxIntervalMs` later).
   */
  wake(): void {
    if (this.#closed || this.#started === undefined) return;
    // No live stream: nothing to read for. The position stays, and the next stream's subscribe reads from it.
    if (this.#subscribers.size === 0) {
      this.#skipped = true;
      return;
    }
    if (this.#reading || this.#waitTimer !== undefined) {
      this.#readAgain = true;
      return;
    }
    const { loopShare, maxIntervalMs } = this.#options;
    const intervalMs = Math.min(maxIntervalMs, this.#lastFanOutMs * (1 / loopShare - 1));
    const waitMs = this.#lastReadAt + intervalMs - performance.now();
    if (waitMs >= 1) {
      this.#waitTimer = setTimeout(() => {
        this.#waitTimer = undefined;
        this.#readAgain = false;
        this.wake();
      }, waitMs);
      return;
    }
    this.#reading = true;
    void this.#readNew().finally(() => {
      this.#reading = false;
      if (this.#readAgain) {
        this.#readAgain = false;
        this.wake();
      }
    });
  }

  async #readNew(): Promise<void> {
    await this.#started;
    let fanOutMs = 0;
    try {
      for (;;) {
        const changes = await this.#log.changesAfter(this.#position, this.#options.batchSize);
        if (this.#closed || changes.length === 0) return;
        const began = performance.now();
        const batch = new FeedBatch(
          changes.map((change) => change.sequence),
          changes.map((change) => this.#options.render(change)),
        );
        this.#position = batch.last;
        fanOutMs += performance.now() - began;
        fanOutMs += await this.#handOut(batch);
        if (this.#closed || changes.length < this.#options.batchSize) return;
      }
    } catch (error) {
      this.#options.onError(error);
    } finally {
      this.#lastFanOutMs = fanOutMs;
      this.#lastReadAt = performance.now();
    }
  }

  /**
   * Hands `batch` to every live stream, in slices of about HAND_OUT_SLICE_MS with the event loop let run between them
   * (setImmediate: after the I/O that came meanwhile), so that a commit's answers and the next commit do not wait for
   * a thousand writes. Resolves with the time the slices took. A stream that subscribes meanwhile has read the batch's
   * changes from the log already (it subscribes at `position`, set to the batch's last); one that leaves is skipped.
   */
  async #handOut(batch: FeedBatch): Promise<number> {
    const subscribers = [...this.#subscribers];
    let spentMs = 0;
    let index = 0;
    while (index < subscribers.length) {
      const began = performance.now();
      do {
        const subscriber = subscribers[index] as FeedSubscriber;
        index += 1;
        if (this.#subscribers.has(subscriber)) subscriber.deliver(batch);
      } while (index < subscribers.length && performance.now() - began < HAND_OUT_SLICE_MS);
      spentMs += performance.now() - began;
      if (index < subscribers.length) await new Promise((resolve) => setImmediate(resolve));
      if (this.#closed) break;
    }
    return spentMs;
  }

  #schedulePoll(): void {
    if (this.#closed) return;
    this.#pollTimer = setTimeout(() => {
      this.wake();
      this.#schedulePoll();
    }, this.#options.pollMs);
    this.#pollTimer.unref();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#pollTimer);
    clearTimeout(this.#waitTimer);
    this.#stopListening?.();
    this.#subscribers.clear();
  }
}
