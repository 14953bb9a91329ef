/**
 * The part of the write queue's bound below which no writer is refused for holding more than its share: while the
 * queue is this empty there is no contention, and one client alone may fill the queue to its bound.
 */
export const SHARING_FROM = 0.5;

/**
 * Whether a writer holding `held` of the writes queued, among `writers` writers with writes queued (itself
 * included), is refused one more: only when the queue holds at least SHARING_FROM of `queueLimit` (`depth`), and
 * only when it holds its share (queueLimit ÷ writers) or more. A writer under its share is admitted up to the bound.
 */
export function overShare(depth: number, queueLimit: number, held: number, writers: number): boolean {
  return depth >= queueLimit * SHARING_FROM && held * writers >= queueLimit;
}

/**
 * The writes each writer (a client key the caller names, such as its address) has queued in one write queue, so
 * that under contention a client on many connections cannot take the whole queue from one on few: work-conserving,
 * the share binds only past SHARING_FROM of the bound. One map lookup a create, one as it leaves the queue.
 */
export class WriterShares {
  readonly #queued = new Map<string, number>();
  readonly #queueLimit: number;

  constructor(queueLimit: number) {
    this.#queueLimit = queueLimit;
  }

  /**
   * Whether `writer` may queue one more write, `depth` telling how full the queue is (asked only when another
   * writer has writes queued: a writer alone is held by the bound only).
   */
  allows(writer: string, depth: () => number): boolean {
    const held = this.#queued.get(writer);
    // A writer with nothing queued holds no share to exceed; one alone with writes queued is held by the bound only.
    if (held === undefined || this.#queued.size === 1) return true;
    return !overShare(depth(), this.#queueLimit, held, this.#queued.size);
  }

  /** A write of `writer` joined the queue. */
  add(writer: string): void {
    this.#queued.set(writer, (this.#queued.get(writer) ?? 0) + 1);
  }

  /** A write of `writer` left the queue (handed to storage). */
  remove(writer: string): void {
    const held = this.#queued.get(writer);
    if (held === undefined) return;
    if (held <= 1) this.#queued.delete(writer);
    else this.#queued.set(writer, held - 1);
  }

  /** Writers with writes queued. */
  get writers(): number {
    return this.#queued.size;
  }
}
