import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Files that appear whole or not at all. Each is written under a temporary name in the target's own folder (so the
 * final rename stays within one file system and is atomic), made durable, and only then renamed to its name: an
 * interrupted run leaves a dot-file named `.NAME.partial-…`, never a file that looks complete. Such leftovers are
 * safe to delete.
 */

/** A fresh temporary name beside `target`, unique to this process and call. */
export function partialPathBeside(target: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.partial-${process.pid}-${randomBytes(4).toString('hex')}`);
}

/**
 * Creates `file`, which must not exist, empty and readable by its owner only (0600, whatever the umask): backups
 * and exports hold what the database holds.
 */
export function createPrivateFile(file: string): void {
  const fd = fs.openSync(file, 'wx', 0o600);
  try {
    fs.fchmodSync(fd, 0o600);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * fsync of a path: a file's contents, or a directory's entries (which makes a rename or creation in it durable).
 * Both are opened read-only; Linux syncs whatever the descriptor's mode.
 */
export function syncPath(target: string): void {
  const fd = fs.openSync(target, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Makes `partial` durable, renames it to `target` (replacing any file there in one step), and makes the rename durable. */
export function publishFile(partial: string, target: string): void {
  syncPath(partial);
  fs.renameSync(partial, target);
  syncPath(path.dirname(target));
}

/** Removes what a failed run left; a file already gone is fine. */
export function removeQuietly(...files: string[]): void {
  for (const file of files) fs.rmSync(file, { force: true });
}

/**
 * A file written piece by piece (an export of any size), published whole by commit(). Each write waits for the
 * file system, so memory holds at most the piece being written.
 */
export class AtomicFileWriter {
  readonly #target: string;
  readonly #partial: string;
  readonly #handle: fs.promises.FileHandle;

  private constructor(target: string, partial: string, handle: fs.promises.FileHandle) {
    this.#target = target;
    this.#partial = partial;
    this.#handle = handle;
  }

  static async open(target: string): Promise<AtomicFileWriter> {
    const partial = partialPathBeside(target);
    const handle = await fs.promises.open(partial, 'wx', 0o600);
    try {
      await handle.chmod(0o600);
    } catch (error) {
      await handle.close();
      removeQuietly(partial);
      throw error;
    }
    return new AtomicFileWriter(target, partial, handle);
  }

  async write(text: string): Promise<void> {
    await this.#handle.writeFile(text, 'utf8');
  }

  /** Flushes the file to disk, closes it and gives it its name. */
  async commit(): Promise<void> {
    await this.#handle.sync();
    await this.#handle.close();
    fs.renameSync(this.#partial, this.#target);
    syncPath(path.dirname(this.#target));
  }

  /** Closes and removes the partial file; the target is left as it was. */
  async abort(): Promise<void> {
    await this.#handle.close().catch(() => undefined);
    removeQuietly(this.#partial);
  }
}
