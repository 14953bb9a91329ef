/**
 * Loaded with `node --import` into a CLI run, so into the child Node the CLI starts for export, import and copy too
 * (it forwards its execArgv): samples the main thread's V8 heap and, on exit, prints the largest size V8 committed
 * for it as one `heap-probe heapTotalMiB=…` line on stderr. Worker threads (the SQLite checkpointer) print nothing.
 */
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  let peak = 0;
  const sample = () => {
    peak = Math.max(peak, process.memoryUsage().heapTotal);
  };
  setInterval(sample, 5).unref();
  process.on('exit', () => {
    sample();
    process.stderr.write(`heap-probe heapTotalMiB=${(peak / 1048576).toFixed(1)}\n`);
  });
}
