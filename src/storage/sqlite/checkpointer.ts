import { Worker } from 'node:worker_threads';
import type { StorageIncident } from '../store.js';

export interface CheckpointerOptions {
  /** How often the thread looks at the WAL; it checkpoints once enough frames wait, or the oldest has waited maxDelayMs. */
  readonly intervalMs: number;
  /** The longest a commit waits to be checkpointed (a store between bursts of writes). */
  readonly maxDelayMs: number;
  /**
   * Frames (pages written by commits) waiting in the WAL at which a checkpoint runs before maxDelayMs has passed, and
   * the WAL's length past which a checkpoint makes the next commit start it again from its beginning.
   */
  readonly walFrames: number;
  /** Wait before restarting a thread that died; it doubles with each death before a successful checkpoint. */
  readonly restartDelayMs: number;
  /** The longest wait between restarts. */
  readonly maxRestartDelayMs: number;
  /** Failed checkpoints in a row after which the WAL counts as not checkpointable. */
  readonly failuresToUnready: number;
}

export const CHECKPOINTER_DEFAULTS: CheckpointerOptions = {
  intervalMs: 250,
  // Each checkpoint copies a page once however many commits rewrote it since the last: with random ids the same
  // leaves are dirtied again and again, so checkpoints further apart copy fewer pages per create.
  maxDelayMs: 2000,
  // With 4 KiB pages, 64 MiB of WAL: a few seconds of creates with random ids into a large store.
  walFrames: 16_384,
  // A thread that died once is back almost at once; one that dies as soon as it starts (a file it cannot open) is
  // retried ever more slowly, never in a tight loop.
  restartDelayMs: 500,
  maxRestartDelayMs: 30_000,
  // A failure or two can be passing (an I/O hiccup); by the third the WAL has gone about a second unchecked (after
  // a failure, the thread checkpoints at every interval until one succeeds).
  failuresToUnready: 3,
};

export interface CheckpointerThreadData {
  readonly file: string;
  readonly intervalMs: number;
  readonly maxDelayMs: number;
  readonly walFrames: number;
}

/** What the thread tells the main thread: every failed checkpoint, and the first success after a start or failures. */
export type CheckpointerReport =
  | { readonly kind: 'ok' }
  | { readonly kind: 'failed'; readonly name: string; readonly message: string; readonly code?: string; readonly errcode?: number };

/**
 * What the main thread tells the thread: stop; or, for tests that must see the thread die or its checkpoints fail,
 * crash (throw), or fail the next `count` checkpoints as a real failure would.
 */
export type CheckpointerCommand = { readonly kind: 'stop' } | { readonly kind: 'crash' } | { readonly kind: 'fail'; readonly count: number };

/**
 * Runs the checkpointer thread (checkpointer-thread.ts) and keeps it running. The write connection never checkpoints
 * (wal_autocheckpoint is off), so without this thread the WAL would grow without bound: a thread that dies is
 * reported and restarted, with a growing delay, and checkpoints failing inside it are reported too. `problem` says
 * whether the WAL can be checkpointed now, for readiness.
 */
export class Checkpointer {
  readonly #file: string;
  readonly #options: CheckpointerOptions;
  readonly #report: (incident: StorageIncident) => void;
  /** The running thread; undefined from its death until its restart. */
  #thread: Worker | undefined;
  /** Settles when the running thread has exited. */
  #threadExited: Promise<void> = Promise.resolve();
  /** Why the last thread died, until a restarted one has checkpointed successfully. */
  #death: Error | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #restartDelayMs: number;
  #failuresInARow = 0;
  #lastFailure: Error | undefined;
  #stopped = false;

  constructor(file: string, options: CheckpointerOptions, report: (incident: StorageIncident) => void) {
    this.#file = file;
    this.#options = options;
    this.#report = report;
    this.#restartDelayMs = options.restartDelayMs;
    this.#start();
  }

  /** Why the WAL cannot be checkpointed now (the thread is dead or restarting, or checkpoints keep failing), if so. */
  get problem(): Error | undefined {
    if (this.#death) return new Error('the SQLite checkpointer thread is not running', { cause: this.#death });
    if (this.#failuresInARow >= this.#options.failuresToUnready) {
      return new Error(`the last ${this.#failuresInARow} WAL checkpoints failed`, { cause: this.#lastFailure });
    }
    return undefined;
  }

  /** Sends the running thread a command; for tests, which make it crash or fail on purpose. */
  command(command: CheckpointerCommand): void {
    this.#thread?.postMessage(command);
  }

  /** Stops the thread (after its checkpoint in progress, if any) and any restart; resolves once it has exited. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#restartTimer);
    this.#thread?.postMessage({ kind: 'stop' } satisfies CheckpointerCommand);
    await this.#threadExited;
  }

  #start(): void {
    const thread = new Worker(new URL('./checkpointer-thread.js', import.meta.url), {
      workerData: { file: this.#file, intervalMs: this.#options.intervalMs, maxDelayMs: this.#options.maxDelayMs, walFrames: this.#options.walFrames } satisfies CheckpointerThreadData,
    });
    this.#thread = thread;
    this.#failuresInARow = 0;
    let crash: Error | undefined;
    // Listened for from the start: a thread that stops emits 'exit' in the same callback that delivers its last
    // message, so a listener attached later could miss it.
    this.#threadExited = new Promise((resolve) => {
      thread.once('exit', (code) => {
        this.#thread = undefined;
        resolve();
        if (!this.#stopped) this.#died(crash ?? new Error(`the thread exited with code ${code}`));
      });
    });
    thread.on('error', (error) => {
      crash = error;
    });
    thread.on('message', (report: CheckpointerReport) => this.#heard(report));
  }

  #died(cause: Error): void {
    this.#death = cause;
    const delayMs = this.#restartDelayMs;
    this.#restartDelayMs = Math.min(delayMs * 2, this.#options.maxRestartDelayMs);
    this.#report({
      level: 'error',
      message: `the SQLite checkpointer thread died; restarting it in ${delayMs} ms (the WAL grows until it checkpoints again)`,
      error: cause,
    });
    this.#restartTimer = setTimeout(() => {
      if (this.#stopped) return;
      this.#start();
      this.#report({ level: 'info', message: 'the SQLite checkpointer thread was restarted' });
    }, delayMs);
    // Restarting is no reason to keep the process alive.
    this.#restartTimer.unref();
  }

  #heard(report: CheckpointerReport): void {
    if (report.kind === 'ok') {
      if (this.#death) this.#report({ level: 'info', message: 'the restarted SQLite checkpointer thread checkpoints again' });
      else if (this.#failuresInARow > 0) this.#report({ level: 'info', message: `WAL checkpoints succeed again after ${this.#failuresInARow} failed` });
      this.#death = undefined;
      this.#failuresInARow = 0;
      this.#restartDelayMs = this.#options.restartDelayMs;
      return;
    }
    this.#failuresInARow += 1;
    const failure = Object.assign(
      new Error(report.message),
      { name: report.name },
      report.code === undefined ? {} : { code: report.code },
      report.errcode === undefined ? {} : { errcode: report.errcode },
    );
    this.#lastFailure = failure;
    if (this.#failuresInARow === 1) {
      this.#report({ level: 'warn', message: 'a WAL checkpoint failed; the checkpointer thread retries', error: failure });
    } else if (this.#failuresInARow === this.#options.failuresToUnready) {
      this.#report({
        level: 'error',
        message: `WAL checkpoints keep failing (${this.#failuresInARow} in a row); the WAL grows, and the store reports itself unready until one succeeds`,
        error: failure,
      });
    }
  }
}
