/** What commands write: results on stdout (waiting for the reader), progress and reports on stderr. */

let stdoutClosed = false;
let stdoutWatched = false;

/** Writes to stdout, waiting until it is flushed; resolves false once stdout is closed by its reader. */
export function writeOut(text: string): Promise<boolean> {
  // A flag, not a count of 'error' listeners: the SQLite checkpointer thread's stdout is piped into process.stdout,
  // and the pipe's own listener, which rethrows once it has unpiped, would otherwise stand in for this one.
  if (!stdoutWatched) {
    stdoutWatched = true;
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      stdoutClosed = true;
      if (error.code !== 'EPIPE') {
        process.stderr.write(`plantstore: cannot write output: ${error.message}\n`);
        process.exitCode = 1;
      }
    });
  }
  if (stdoutClosed) return Promise.resolve(false);
  return new Promise((resolve) => {
    process.stdout.write(text, (error) => resolve(!error && !stdoutClosed));
  });
}

/**
 * One status line on stderr, redrawn in place, when stderr is a terminal; elsewhere (a file, a pipe, a log) nothing
 * but whole lines. Redrawn at most every INTERVAL_MS.
 */
export class ProgressLine {
  static readonly INTERVAL_MS = 250;
  readonly #enabled = process.stderr.isTTY === true;
  #shown = false;
  #lastDrawn = 0;

  update(text: string): void {
    if (!this.#enabled || performance.now() - this.#lastDrawn < ProgressLine.INTERVAL_MS) return;
    this.#lastDrawn = performance.now();
    this.#shown = true;
    process.stderr.write(`\r${text}\x1b[K`);
  }

  /** A whole line, above the status line. */
  line(text: string): void {
    this.clear();
    process.stderr.write(`${text}\n`);
  }

  clear(): void {
    if (!this.#shown) return;
    this.#shown = false;
    this.#lastDrawn = 0;
    process.stderr.write('\r\x1b[K');
  }
}
