import v8 from 'node:v8';

/**
 * How far V8's old generation may grow past what survived its last full collection while a bulk stream runs: to
 * 1.5 times it. Left to V8, a busy heap may grow to four times its survivors before the next one: twenty streams
 * keep some 45 MiB alive, but what they allocate lives long enough (a commit and its sync) to be promoted, so the old
 * generation filled to 170 MiB of mostly garbage between collections, and stayed that size in RSS. At 1.5 times, a
 * full collection runs some three times as often, each marking the same survivors (about 15 ms), while the streams'
 * RSS grows less than half as much (BENCHMARKS.md, "Bulk streams under overload").
 */
export const STREAMING_HEAP_GROWING_PERCENT = 50;

/** Whoever started the process set the factor itself, by Node's flag (Node takes it only on the command line). */
const SET_BY_FLAG = process.execArgv.some((flag) => /--heap[-_]growing[-_]percent\b/.test(flag));

/** Streams holding the factor, over every server of this process. */
let held = 0;

/**
 * Called as a bulk stream begins; the function it returns, as it ends. While any stream is held, V8's old generation
 * grows to STREAMING_HEAP_GROWING_PERCENT over its survivors; once none is, V8 chooses again (0: its own factor).
 * V8 reads the flag each time a full collection sets the next limit, so it takes effect from the next one. The flag
 * is the process's, every thread's: only a process whose main thread alone serves may use this, or one thread's
 * streams ending would undo another's. Does nothing when the flag was given to Node.
 */
export function holdStreamingHeapGrowth(): () => void {
  if (SET_BY_FLAG) return () => undefined;
  held += 1;
  if (held === 1) v8.setFlagsFromString(`--heap-growing-percent=${STREAMING_HEAP_GROWING_PERCENT}`);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    held -= 1;
    if (held === 0) v8.setFlagsFromString('--heap-growing-percent=0');
  };
}
