import { after } from 'node:test';

/**
 * Node 20's test runner says nothing about a test file whose process exits, with code 0, while a test or hook
 * still awaits a promise that can never settle (the event loop simply empties): the file's remaining suites vanish
 * from the totals and the run stays green. Every test file imports this first; unless the file got as far as its
 * root `after` hooks, the process exits 1 and the runner reports the file as failed.
 */
let reachedTheEnd = false;
after(() => {
  reachedTheEnd = true;
});
process.on('exit', () => {
  if (reachedTheEnd) return;
  process.stderr.write('exit-guard: the event loop emptied before every test and hook had finished; failing the file\n');
  process.exitCode = 1;
});
