/**
 * What the `plantstore` command does once its bin (./plantstore.ts) has caught the signals: it checks the Node.js
 * release first, then decides how the command runs, loading the rest only after both.
 *
 * The check comes before any other module of plantstore is loaded: on a release older than `engines.node` the
 * storage driver and the language features the code relies on fail in ways that name neither (Node 20 crashed in
 * the native SQLite module with a segmentation fault). Static imports are evaluated before this module's body, so
 * this file imports only Node's own modules, package-info.js and signals.js (which do too); everything else is a dynamic import
 * after the check. It must also parse on those older releases, which TypeScript's ES2022 output does.
 *
 * export, import and copy stream rows through a live heap that does not depend on the table's size, yet V8, left
 * uncapped, lets its young and old generations grow with the bytes allocated, so peak RSS would rise with the row
 * count (docs/benchmarks.md, "Figures other pages rest on"). A heap limit is fixed when the isolate starts and cannot be set from inside
 * it, so these commands run in a child Node started with bounded heap flags, unless the operator already chose limits
 * (on the command line or in NODE_OPTIONS), which are kept. The child shares this process's stdin, stdout and
 * stderr (a terminal stays a terminal, a pipe keeps its backpressure), receives the signals this process is sent, and
 * its exit status becomes this process's. Every other command runs in this process, `serve` included, so a
 * supervisor's signals reach the server itself (docs/memory.md, "Under load").
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { catchServeSignals, type EarlySignals } from '../serve/signals.js';
import { readPackageInfo, unsupportedNodeMessage } from './package-info.js';

const BOUNDED_COMMANDS = new Set(['export', 'import', 'copy']);

/** Signals an operator or a supervisor sends to end a command; the child gets each one this process gets. */
const FORWARDED_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

function heapAlreadyChosen(): boolean {
  const chosen = (flag: string) => /--max-old-space-size|--max-semi-space-size/.test(flag);
  return process.execArgv.some(chosen) || chosen(process.env['NODE_OPTIONS'] ?? '');
}

function runBounded(command: string, heapFlags: readonly string[]): void {
  const script = fileURLToPath(new URL('./dispatch.js', import.meta.url));
  // The handlers go in before the child exists. spawn() returns only once the child has started its program; a signal
  // that arrived in that time, with no handler yet, would end this process by default and leave the child running on,
  // orphaned. Node runs a signal's handler from the event loop, so when one runs, the child is there to receive it.
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  for (const signal of FORWARDED_SIGNALS) process.on(signal, forward);
  const child = spawn(process.execPath, [...process.execArgv, ...heapFlags, script, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  child.on('error', (error) => {
    process.stderr.write(`plantstore: cannot start ${command}: ${error.message}\n`);
    process.exitCode = 1;
  });
  child.on('exit', (code, signal) => {
    for (const forwarded of FORWARDED_SIGNALS) process.off(forwarded, forward);
    if (signal === null) {
      process.exitCode = code ?? 1;
      return;
    }
    if (signal === 'SIGABRT') {
      // What V8 does when the heap cap is reached: its own message ("JavaScript heap out of memory") is above.
      process.stderr.write(
        `plantstore: ${command} was aborted; if V8 reported "heap out of memory" above, it needed more than its bounded heap ` +
          `(${heapFlags.join(' ')}): run it again with NODE_OPTIONS='--max-old-space-size=MiB' set higher\n`,
      );
      process.exitCode = 134;
      return;
    }
    // Ended by a signal: end the same way, so whoever started plantstore sees what happened to it.
    process.kill(process.pid, signal);
  });
}

/**
 * Every command but `serve` gets Node's default action for each signal back, as if the bin had caught none: a signal
 * that came while it loaded ends it now, the way the default would have then. The event loop turns first, so that a
 * signal that came but whose handler has not run yet is in the record rather than dropped with the handler. Returns
 * whether such a signal was sent again, to end this process.
 */
async function restoreDefaultSignals(early: EarlySignals): Promise<boolean> {
  await new Promise((resolve) => setImmediate(resolve));
  early.release();
  const [first] = early.caught;
  if (first === undefined) return false;
  process.kill(process.pid, first.signal);
  return true;
}

/** Runs the command `process.argv` names; `early` is what the bin's handlers caught (./plantstore.ts). */
export async function launch(early: EarlySignals): Promise<void> {
  const command = process.argv[2];
  // `serve` must not be ended by Node's default action for a signal that comes while it loads and starts
  // (src/serve/signals.ts keeps them until the server handles them).
  if (command === 'serve') catchServeSignals(early);
  else if (await restoreDefaultSignals(early)) return;
  const unsupported = unsupportedNodeMessage(process.version, readPackageInfo().nodeRange);
  if (unsupported !== undefined) {
    process.stderr.write(`${unsupported}\n`);
    process.exitCode = 1;
  } else if (command !== undefined && BOUNDED_COMMANDS.has(command) && !heapAlreadyChosen()) {
    const { BOUNDED_HEAP_FLAGS } = await import('./heap-limits.js');
    runBounded(command, BOUNDED_HEAP_FLAGS);
  } else {
    await import('./dispatch.js');
  }
}
