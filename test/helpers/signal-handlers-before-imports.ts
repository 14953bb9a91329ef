/**
 * A probe for test/process/signals.test.ts, loaded into `plantstore` with `node --import`: it records every module the
 * bin loads and whether SIGHUP, SIGTERM and SIGINT each had a handler at that moment, and writes the record, as
 * JSON, to the file SIGNAL_PROBE_FILE names when the process exits. module.registerHooks runs its hooks on the main
 * thread as each import is resolved, static or dynamic, so a static import of the bin shows up before its handlers do.
 */
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { isMainThread } from 'node:worker_threads';

export interface ProbedImport {
  readonly specifier: string;
  readonly parentURL: string;
  /** Whether all three signals had a listener when it was resolved. */
  readonly signalsHandled: boolean;
}

const file = process.env['SIGNAL_PROBE_FILE'];
if (isMainThread && file !== undefined) {
  const imports: ProbedImport[] = [];
  registerHooks({
    resolve(specifier, context, nextResolve) {
      // The entry (the bin) itself has no parent; everything after it does.
      if (context.parentURL !== undefined) {
        const signalsHandled = (['SIGHUP', 'SIGTERM', 'SIGINT'] as const).every((signal) => process.listenerCount(signal) > 0);
        imports.push({ specifier, parentURL: context.parentURL, signalsHandled });
      }
      return nextResolve(specifier, context);
    },
  });
  process.on('exit', () => writeFileSync(file, JSON.stringify(imports)));
}
