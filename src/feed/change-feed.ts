import type { ChangeLog, PlantChange } from '../storage/change-store.js';

/**
 * The change feed of one event loop: it follows the change log (src/storage/change-store.ts) and fans every new
 * change out to the loop's live streams (`GET /plants/events`). However many streams are open, the log is read once
 * per wake-up: a commit heard from storage (SQLite: the write path; PostgreSQL: LISTEN), a wake() from outside (a
 * worker thread is told by its instance's writer), or the slow fallback poll, for a wake-up lost on the way. Each
 * change is rendered once (`render`) and the same rendering handed to every stream.
 */

/** One change as the streams receive it: its sequence, and its rendering, made once for every stream. */
export interface FeedItem<Rendered> {
  readonly sequence: bigint;
  readonly rendered: Rendered;
}

/** A live stream: handed every change the feed reads, in order. It ignores those up to its own cursor. */
export interface FeedSubscriber<Rendered> {
  deliver(items: readonly FeedItem<Rendered>[]): void;
}

/** What the feed reports (src/observability/metrics.ts implements it). */
export interface FeedObserver {
  readonly streamOpened: () => void;
  readonly streamClosed: (why: StreamEnd) => void;
  readonly eventsSent: (count: number) => void;
  readonly resetSent: () => void;
}

/** Why a stream ended: the client left, it did not read (its buffer passed the bound), or the server is shutting down. */
export type StreamEnd = 'client' | 'slow' | 'shutdown' | 'error';

export interface ChangeFeedOptions<Rendered> {
  readonly render: (change: PlantChange) => Rendered;
  /** Changes read per query, for the live fan-out and for each stream's backlog. */
  readonly batchSize: number;
  /** The fallback poll, for a wake-up lost on the way (the LISTEN connection lost, a message dropped). */
  readonly pollMs: number;
  /**
   * Reads at most once per this many milliseconds per live stream, and at least once per `maxIntervalMs`: a read
   * writes to every stream, so with many streams the changes of the commits in between go out together, in one write
   * per stream, and the fan-out's share of the event loop stays bounded however fast commits come; with few streams
   * each commit goes out at once.
   */
  readonly intervalPerStreamMs: number;
  readonly maxIntervalMs: number;
  /** A read that failed; the next wake-up or poll tries again. */
  readonly onError: (error: unknown) => void;
}

export class ChangeFeed<Rendered> {
  readonly #log: ChangeLog;
  readonly #options: ChangeFeedOptions<Rendered>;
  readonly #subscribers = new Set<FeedSubscriber<Rendered>>();
  /** The newest sequence read and fanned out: every live stream has been handed everything up to it. */
  #position = 0n;
  #started: Promise<void> | undefined;
  #reading = false;
  #readAgain = false;
  #skipped = false;
  #lastReadAt = -Infinity;
  #waitTimer: NodeJS.Timeout | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #stopListening: (() => void) | undefined;
  #closed = false;

  constructor(log: ChangeLog, options: ChangeFeedOptions<Rendered>) {
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
  subscribe(subscriber: FeedSubscriber<Rendered>): () => void {
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
   * Something committed: read what is new, once, however many wake-ups come while a read runs, and no more often
   * than the options' interval for the streams open.
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
    const intervalMs = Math.min(this.#options.maxIntervalMs, this.#subscribers.size * this.#options.intervalPerStreamMs);
    const waitMs = this.#lastReadAt + intervalMs - performance.now();
    if (waitMs > 0) {
      this.#waitTimer = setTimeout(() => {
        this.#waitTimer = undefined;
        this.#readAgain = false;
        this.wake();
      }, waitMs);
      return;
    }
    this.#reading = true;
    this.#lastReadAt = performance.now();
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
    try {
      for (;;) {
        const changes = await this.#log.changesAfter(this.#position, this.#options.batchSize);
        if (this.#closed || changes.length === 0) return;
        const items = changes.map((change) => ({ sequence: change.sequence, rendered: this.#options.render(change) }));
        this.#position = (items.at(-1) as FeedItem<Rendered>).sequence;
        for (const subscriber of this.#subscribers) subscriber.deliver(items);
        if (changes.length < this.#options.batchSize) return;
      }
    } catch (error) {
      this.#options.onError(error);
    }
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
