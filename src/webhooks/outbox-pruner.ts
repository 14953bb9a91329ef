import type { WebhookOutbox } from '../storage/webhook-store.js';
import type { WebhookLog } from './dispatcher-options.js';

const PRUNE_INTERVAL_MS = 3_600_000;
/** The first prune comes soon after start, not an interval later. */
const FIRST_PRUNE_DELAY_MS = 60_000;

/** Deletes the outbox's delivered events past the retention: soon after start, then every `intervalMs`, until stopped. */
export class OutboxPruner {
  readonly #store: WebhookOutbox;
  readonly #retentionMs: number;
  readonly #log: WebhookLog;
  readonly #pruneIntervalMs: number;
  #pruneTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(store: WebhookOutbox, retentionMs: number, log: WebhookLog, intervalMs: number = PRUNE_INTERVAL_MS) {
    this.#store = store;
    this.#retentionMs = retentionMs;
    this.#log = log;
    this.#pruneIntervalMs = intervalMs;
  }

  start(): void {
    this.#pruneTimer = setTimeout(() => void this.#pruneNow(), Math.min(FIRST_PRUNE_DELAY_MS, this.#pruneIntervalMs));
    this.#pruneTimer.unref();
  }

  /** Deletes delivered events past the retention now. */
  async prune(): Promise<number> {
    return this.#store.prune(this.#retentionMs);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#pruneTimer);
  }

  async #pruneNow(): Promise<void> {
    try {
      const deleted = await this.prune();
      if (deleted > 0) this.#log.info({ deleted }, 'pruned delivered webhook events');
    } catch (error) {
      this.#log.warn({ err: error }, 'pruning delivered webhook events failed; will try again');
    } finally {
      if (!this.#stopped) {
        this.#pruneTimer = setTimeout(() => void this.#pruneNow(), this.#pruneIntervalMs);
        this.#pruneTimer.unref();
      }
    }
  }
}
