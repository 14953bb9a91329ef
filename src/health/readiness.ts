import type { WriteQueue } from '../plants/write-queue.js';
import { StorageUnavailableError } from '../storage/errors.js';
import type { WritableCheck } from '../storage/store.js';

/**
 * A successful heartbeat answers every readiness check for this long. Readiness is public (/readyz needs no token)
 * and each heartbeat is a durable commit, so however often it is polled, storage sees at most one heartbeat per
 * interval; a failure is never reused, so recovery shows at the next check.
 */
export const READY_REUSE_MS = 250;

/** This instance is shutting down: it finishes what it has, and takes nothing new for long. */
export class DrainingError extends Error {
  constructor() {
    super('shutting down: this instance finishes the requests it has and takes no new work; use another');
    this.name = 'DrainingError';
  }
}

/** Whether this instance can take writes now: storage takes a durable heartbeat, and has not just refused creates. */
export class Readiness {
  readonly #store: WritableCheck;
  readonly #writes: Pick<WriteQueue, 'refusedByStorageRecently'>;
  #readyAt = -Infinity;
  #heartbeat: Promise<void> | undefined;
  #draining = false;

  constructor(store: WritableCheck, writes: Pick<WriteQueue, 'refusedByStorageRecently'>) {
    this.#store = store;
    this.#writes = writes;
  }

  /**
   * From now on never ready: the instance is shutting down. Called first thing on SIGTERM, while the listener still
   * accepts, so a load balancer polling /readyz takes it out of rotation before it stops accepting.
   */
  startDraining(): void {
    this.#draining = true;
  }

  /** Resolves when ready; rejects with DrainingError, StorageUnavailableError (or the heartbeat's own error) when not. */
  async check(): Promise<void> {
    if (this.#draining) throw new DrainingError();
    if (this.#writes.refusedByStorageRecently) throw new StorageUnavailableError();
    if (performance.now() - this.#readyAt >= READY_REUSE_MS) await this.#checkWritable();
  }

  /** One heartbeat in flight at most, shared by every check that arrives meanwhile. */
  #checkWritable(): Promise<void> {
    return (this.#heartbeat ??= this.#store
      .checkWritable()
      .then(() => {
        this.#readyAt = performance.now();
      })
      .finally(() => {
        this.#heartbeat = undefined;
      }));
  }
}
