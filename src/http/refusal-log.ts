import type { FastifyBaseLogger } from 'fastify';

/** Refusals are reported at most this often, counted: an overload is a line per interval, not a line per refusal. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

/**
 * The log of writes refused because the write queue was full (503, WriteQueueFullError): an expected answer to
 * overload, not a fault, so it is not logged per request at error level with a stack (bulk streams refused under a
 * flood would write more log than plants). The first refusal of a burst is logged at once at `warn`, the
 * others counted and logged in one line when REFUSAL_LOG_INTERVAL_MS has passed.
 */
export class RefusalLog {
  readonly #log: FastifyBaseLogger;
  readonly #intervalMs: number;
  #count = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(log: FastifyBaseLogger, intervalMs = REFUSAL_LOG_INTERVAL_MS) {
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  /** One write refused: the write queue was full. */
  writeQueueFull(): void {
    this.#count += 1;
    if (this.#timer !== undefined) return;
    this.#report();
    this.#arm();
  }

  /** At the end of an interval, what was counted in it is reported, and another interval starts if there was any. */
  #arm(): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // Nothing more in the interval: the next refusal starts a burst and is logged at once.
      if (this.#count === 0) return;
      this.#report();
      this.#arm();
    }, this.#intervalMs).unref();
  }

  /** Reports what is counted and stops the timer (the app closes). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#count > 0) this.#report();
  }

  #report(): void {
    const refused = this.#count;
    this.#count = 0;
    this.#log.warn({ refused, intervalMs: this.#intervalMs }, `refused ${refused} write(s) with 503: the write queue was full (WRITE_QUEUE_LIMIT)`);
  }
}
