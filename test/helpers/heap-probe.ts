/**
 * Loaded with `node --expose-gc --import` into a CLI run, so into the child Node the CLI starts for export, import and
 * copy too (it forwards its execArgv). On the main thread it runs a full collection every 20 ms and keeps the largest
 * heap still in use right after one: the memory the command keeps alive, which is what its code decides, unlike the
 * heap V8 commits around it, which swings with where collections happen to fall. On exit it prints one
 * `heap-probe {…}` JSON line on stderr with that figure, the number of samples and the process's execArgv. Worker
 * threads (the SQLite checkpointer) print nothing.
 */
import { isMainThread } from 'node:worker_threads';

const collect = (globalThis as { gc?: () => void }).gc;

if (isMainThread) {
  if (collect === undefined) throw new Error('heap-probe needs node --expose-gc');
  let liveBytes = 0;
  let samples = 0;
  const sample = () => {
    collect();
    samples += 1;
    liveBytes = Math.max(liveBytes, process.memoryUsage().heapUsed);
  };
  setInterval(sample, 20).unref();
  process.on('exit', () => {
    const report = { liveMiB: Number((liveBytes / 1048576).toFixed(1)), samples, execArgv: process.execArgv };
    process.stderr.write(`heap-probe ${JSON.stringify(report)}\n`);
  });
}
