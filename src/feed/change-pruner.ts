import type { Logger } from 'pino';
import type { ChangeRetention } from '../storage/change-store.js';

/** How often the change log is pruned; the first prune comes soon after start. */
const PRUNE_INTERVAL_MS = 10 * 60_000;
const FIRST_PRUNE_DELAY_MS = 30_000;

/**
 * Prunes the change log by age and count (FEED_RETENTION, FEED_RETENTION_COUNT), on a timer of the process that
 * opened the store, as the webhook dispatcher prunes its outbox. On PostgreSQL every instance prunes; the deletes are
 * idempotent, so two at once only repeat each other's work.
 */
export class ChangePruner {
  readonly #store: ChangeRetention;
  readonly #retention: { readonly maxAgeMs: number; readonly maxCount: number };
  readonly #log: Logger;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(store: ChangeRetention, retention: { readonly maxAgeMs: number; readonly maxCount: number }, log: Logger, intervalMs = PRUNE_INTERVAL_MS) {
    this.#store = store;
    this.#retention = retention;
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  start(): void {
    this.#schedule(Math.min(FIRST_PRUNE_DELAY_MS, this.#intervalMs));
  }

  async prune(): Promise<number> {
    return this.#store.pruneChanges(this.#retention.maxAgeMs, this.#retention.maxCount);
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.prune().then(
        (deleted) => {
          if (deleted > 0) this.#log.info({ deleted }, 'pruned old changes of the change feed');
        },
        (error: unknown) => this.#log.warn({ err: error }, 'pruning the change feed failed; trying again later'),
      ).finally(() => this.#schedule(this.#intervalMs));
    }, delayMs);
    this.#timer.unref();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }
}
