import { setTimeout as sleep } from 'node:timers/promises';
import { StorageUnavailableError } from '../errors.js';
import { UNOBSERVED, type StorageObserver } from '../observer.js';
import { BUSY_TIMEOUT_MS, isBusy, translateSqliteError, unavailableKind } from './connection.js';

/** Retries of work that meets a lock start 1 ms apart and back off to this. */
const LOCK_RETRY_MAX_MS = 25;

/**
 * How a SQLite store runs its statements on the event loop: its connections never wait for a lock themselves (busy
 * timeout 0), since that wait would block the loop; work that meets one is run again after a short wait instead,
 * until `lockWaitMs` has passed, while the loop serves other requests. Once the store is closed it runs nothing, and
 * it counts every failure once, by kind, with the store's observer.
 */
export class StatementRunner {
  /** Set when the store closes: work is refused from then on. */
  closed = false;
  observer: StorageObserver = UNOBSERVED;

  async run<T>(work: () => T, lockWaitMs = BUSY_TIMEOUT_MS): Promise<T> {
    const deadline = performance.now() + lockWaitMs;
    for (let delay = 1; ; delay = Math.min(delay * 2, LOCK_RETRY_MAX_MS)) {
      if (this.closed) {
        this.observer.storageFailed('closed');
        throw new StorageUnavailableError('storage is closed');
      }
      try {
        return work();
      } catch (error) {
        if (!isBusy(error) || performance.now() + delay > deadline) {
          this.observer.storageFailed(error instanceof StorageUnavailableError ? 'io' : (unavailableKind(error) ?? 'other'));
          throw translateSqliteError(error);
        }
      }
      await sleep(delay);
    }
  }
}
