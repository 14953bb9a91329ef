import fs from 'node:fs';
import { StorageUnavailableError } from '../errors.js';
import type { StorageIncident } from '../store.js';

/** How often the path is looked at when nothing is written, so /readyz and the log tell within about this long. */
const FILE_IDENTITY_CHECK_MS = 1000;

/**
 * The database file this process has open, by device and inode, against the file now at its path. SQLite keeps
 * writing to the file it opened: when that file is removed or replaced under a running server (an operator's
 * mistake, a cleanup job, a volume remounted), commits still succeed, into a file nobody will open again, and every
 * 200 given for them is lost at the next restart. Once the path names another file, or none, the store refuses every
 * write until the process is restarted against a real file: a new file appearing at the path later is not the one
 * SQLite has open either.
 *
 * The path is looked at once per sync of the WAL, after it returns and before any write it covers is answered
 * (`lookNow`, the store's afterSync listener), so no write is acknowledged once the file went away, however many
 * batches the sync covers; and on a timer, so readiness and the log say so without traffic. A write checks only the
 * verdict (`assertSame`): one made into a file already gone is never acknowledged, since its sync's look finds it.
 */
export class DatabaseFileIdentity {
  readonly #file: string;
  readonly #dev: number;
  readonly #ino: number;
  readonly #report: (incident: StorageIncident) => void;
  readonly #timer: NodeJS.Timeout;
  #lost: StorageUnavailableError | undefined;

  /** Takes the identity of the file at `file` now: call it right after SQLite has opened it. */
  constructor(file: string, report: (incident: StorageIncident) => void) {
    const stat = fs.statSync(file);
    this.#file = file;
    this.#dev = stat.dev;
    this.#ino = stat.ino;
    this.#report = report;
    this.#timer = setInterval(() => this.#lookAtPath(), FILE_IDENTITY_CHECK_MS).unref();
  }

  /** Throws StorageUnavailableError once the file at the path was found not to be the one opened (and then forever). */
  assertSame(): void {
    if (this.#lost) throw this.#lost;
  }

  /** Looks at the path now (one stat): afterwards assertSame throws if it no longer names the file opened. */
  lookNow(): void {
    this.#lookAtPath();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #lookAtPath(): StorageUnavailableError | undefined {
    if (this.#lost) return this.#lost;
    let now: fs.Stats | undefined;
    try {
      now = fs.statSync(this.#file);
    } catch (error) {
      // Only a file that is not there is a verdict; a stat that fails otherwise (EIO, EACCES) says nothing of which
      // file is at the path, and SQLite's own errors report what is wrong with the file system.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return undefined;
    }
    if (now && now.dev === this.#dev && now.ino === this.#ino) return undefined;
    const what = now ? 'replaced by another file' : 'removed';
    this.#lost = new StorageUnavailableError(`the SQLite database ${this.#file} was ${what} while open; restart against the real file`);
    this.#report({
      level: 'error',
      message:
        `the SQLite database file ${this.#file} was ${what} under the running server: every write is refused (503) ` +
        'and /readyz answers 503 until the server is restarted against the real database file (see docs/backup-restore.md, "When the database file disappears")',
    });
    this.stop();
    return this.#lost;
  }
}
