#!/usr/bin/env node
/**
 * The `plantstore` command (the package's `bin`, and what `npm start` runs): its first statements catch SIGHUP,
 * SIGTERM and SIGINT, and only then is anything else loaded (./launcher.ts does the rest).
 *
 * Node ends the process on each of these signals unless a handler is installed, and loading plantstore's modules takes
 * a while, longer on a loaded machine: a log rotator's SIGHUP in that time would kill a starting server with
 * nothing logged. Static imports are loaded before a module's body runs, so this module has none (a type import
 * leaves nothing behind) and loads the launcher with a dynamic import once the handlers are in place. The handlers
 * only record what came; the launcher hands the record over (src/serve/signals.ts takes it for `serve`, every other
 * command gets Node's default back, and a signal that came early then ends it as the default would have). What comes
 * before this module's first statement is Node starting, which no program can protect.
 */
import type { CaughtSignal, EarlySignals, ServeSignal } from '../serve/signals.js';

const CAUGHT_FIRST: readonly ServeSignal[] = ['SIGHUP', 'SIGTERM', 'SIGINT'];
const caught: CaughtSignal[] = [];
const record = (signal: ServeSignal) => {
  caught.push({ signal, receivedAt: performance.now() });
};
for (const signal of CAUGHT_FIRST) process.on(signal, record);

const early: EarlySignals = {
  caught,
  release: () => {
    for (const signal of CAUGHT_FIRST) process.off(signal, record);
  },
};
const { launch } = await import('./launcher.js');
await launch(early);
