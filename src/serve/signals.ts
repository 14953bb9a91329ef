/**
 * The signals `plantstore serve` answers, caught from its first instruction, and the watchdog that bounds a shutdown.
 *
 * Node ends the process on SIGHUP, SIGTERM and SIGINT unless a handler is installed, and loading the server's modules
 * and opening storage take a while: a log rotator's SIGHUP in that time would kill the server, and a supervisor's
 * SIGTERM would end it where it stands. So the bin (src/cli/plantstore.ts) records them from its first statement, before
 * it loads anything, the launcher hands that record to catchServeSignals(), and signals that come before `serve`
 * listens for them are kept, with the time they came, until it does (onServeSignal). This module imports only Node's
 * own modules, as the launcher must (it runs before the Node release is checked).
 *
 * A handler of Node's runs on the main event loop, and so does a setTimeout: a shutdown whose event loop is then
 * blocked (a synchronous call that never returns), or whose exit waits for a file-system thread stuck in the kernel
 * (process.exit joins libuv's threads), would outlive any deadline kept there. The deadline is therefore also kept by
 * a watchdog process (./shutdown-watchdog.ts), started when the first stopping signal is handled: it kills the server
 * with SIGKILL at the deadline unless the server has ended, saying what was still pending. Its stdin is a pipe from
 * the server, through which it is told what is pending, and whose end tells it that the server has ended, however.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

export type ServeSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP';

const SERVE_SIGNALS: readonly ServeSignal[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/** A signal and performance.now() when it was caught. */
type Listener = (signal: ServeSignal, receivedAt: number) => void;

export interface CaughtSignal {
  readonly signal: ServeSignal;
  /** performance.now() when it was caught. */
  readonly receivedAt: number;
}

/** What the bin's own handlers caught before anything was loaded (src/cli/plantstore.ts). */
export interface EarlySignals {
  /** In the order they came; the bin's handlers add to it until released. */
  readonly caught: readonly CaughtSignal[];
  /** Removes the bin's handlers: Node's default action is back for a signal no other handler is installed for. */
  release(): void;
}

let catching = false;
let listener: Listener | undefined;
const early: CaughtSignal[] = [];

function receive(signal: ServeSignal): void {
  const receivedAt = performance.now();
  if (listener) listener(signal, receivedAt);
  else early.push({ signal, receivedAt });
}

/**
 * Installs the handlers, once; until onServeSignal is called, the signals are kept, first those `caughtBefore` holds.
 * Its handlers are removed only once these are in place, so no signal meets Node's default in between; a signal
 * that came but whose handler has not run yet is then handled here (Node runs handlers from the event loop).
 */
export function catchServeSignals(caughtBefore?: EarlySignals): void {
  if (catching) return;
  catching = true;
  for (const signal of SERVE_SIGNALS) process.on(signal, receive);
  if (caughtBefore === undefined) return;
  caughtBefore.release();
  early.push(...caughtBefore.caught);
}

/**
 * Hands every signal to `handle` from now on, first those caught earlier, in order. Returns what stops it: signals
 * are then kept again (the handlers stay, so no signal ends the process by Node's default while the command ends).
 */
export function onServeSignal(handle: Listener): () => void {
  catchServeSignals();
  listener = handle;
  for (const { signal, receivedAt } of early.splice(0)) handle(signal, receivedAt);
  return () => {
    if (listener === handle) listener = undefined;
  };
}

const WATCHDOG_SCRIPT = fileURLToPath(new URL('./shutdown-watchdog.js', import.meta.url));

/** A running watchdog: tell it what is pending; it ends by itself when this process ends. */
export interface ShutdownWatchdog {
  pending(what: string): void;
}

/**
 * Starts a watchdog process that SIGKILLs this one at `deadline` (a Date.now() time) unless this one has ended.
 * Neither it nor its pipe keeps this process alive. Returns undefined, having called `failed`, if it cannot start.
 */
export function startShutdownWatchdog(deadline: number, failed: (error: Error) => void): ShutdownWatchdog | undefined {
  let child: ChildProcessByStdio<Writable, null, null>;
  try {
    // Neither the server's Node flags nor its environment (NODE_OPTIONS' hooks): the watchdog needs little and must start fast.
    child = spawn(process.execPath, [WATCHDOG_SCRIPT, String(process.pid), String(deadline)], {
      stdio: ['pipe', 'ignore', 'inherit'],
      env: {},
      // A process group of its own: a second Ctrl-C, which reaches the server's whole group, must not end it too.
      detached: true,
    });
  } catch (error) {
    failed(error as Error);
    return undefined;
  }
  child.on('error', failed);
  child.unref();
  const stdin = child.stdin;
  stdin.on('error', () => undefined);
  (stdin as unknown as { unref?: () => void }).unref?.();
  return {
    pending: (what) => {
      if (!stdin.destroyed) stdin.write(`${what.replace(/\n/g, ' ')}\n`);
    },
  };
}
