import { setTimeout as sleep } from 'node:timers/promises';
import { StorageUnavailableError } from '../errors.js';
import { UNOBSERVED, type StorageObserver } from '../observer.js';
import { BUSY_TIMEOUT_MS, isBusy, translateSqliteError, unavailableKind } from './connection.js';

/** Retries of work that meets a lock start 1 ms apart and back off to this. */
const LOCK_RETRY_MAX_MS = 25;

/**
 * How a SQLite store runs its statements on the event loop: its connections never wait for a lock themselves (busy
 * timeout 0), since that wait would block the loop; work that meets one is run again after a short wait instead,
 * until `lockWaitMs` has passed, while the loop serves other requests. It also holds the store's closed state and
 * observer, so that every failure is counted once, by kind.
 */
export class LockRetry {
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
