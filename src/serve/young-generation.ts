import { PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';

/**
 * The young generation (V8's new space, both semi-spaces) `serve` keeps to: what a start leaves it at on Node 24.
 * Left alone, V8 doubles it to its maximum under any sustained allocation (a bulk stream, a connection flood, a busy
 * minute), and keeps it: most of what a server grows by under floods and bulk streams, while the same runs with the
 * cap grow far less at no cost in CPU the bench can measure (BENCHMARKS.md, "Bulk streams under overload").
 */
export const YOUNG_GENERATION_MIB = 32;

const MiB = 1024 * 1024;
/** V8's default growth factor of the new space, restored when it is below the cap (it shrinks when allocation is slow). */
const GROWTH_FACTOR = 2;
/** Node flags by which whoever starts the process sizes the young generation themselves; then it is left to them. */
const SIZED_BY_FLAG = /--(max-semi-space-size|semi-space-growth-factor)\b/;

/**
 * Whether this V8 sizes its new space the way the cap was measured on (Node 22 to 24, V8 12 and 13): Node 26's V8
 * grows the new space further under the cap than without it under the same allocation
 * (test/process/young-generation.test.ts), so there the cap is left off and V8 sizes it alone.
 */
export function youngGenerationCapApplies(v8Version = process.versions.v8): boolean {
  return Number(v8Version.split('.')[0]) < 14;
}

function newSpaceBytes(): number {
  return v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0;
}

/**
 * Keeps the young generation at `mib` at most, the way `--max-semi-space-size` would, although that flag can only be
 * given when Node starts: `serve` runs in the process it is started in (no wrapper between a supervisor's signals and
 * the server), and re-executing itself would open a second window in which a SIGHUP kills it (src/cli/plantstore.ts).
 * V8 grows its new space only at a garbage collection, by `--semi-space-growth-factor`, a flag it reads each time; so
 * after every collection the factor is set to 1 while the new space is at the cap and back to V8's default below it.
 * V8's flags are the process's, every thread's: with worker threads serving (WORKERS > 1) this must not run, or their
 * young generations would stay at the size they had. Does nothing when a flag given to Node sizes it. Returns the stop.
 */
export function capYoungGeneration(mib = YOUNG_GENERATION_MIB): () => void {
  if (!youngGenerationCapApplies()) return () => undefined;
  if ([...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].some((flag) => SIZED_BY_FLAG.test(flag))) return () => undefined;
  let growing: boolean | undefined;
  const keep = (): void => {
    const grow = newSpaceBytes() < mib * MiB;
    if (grow === growing) return;
    growing = grow;
    v8.setFlagsFromString(`--semi-space-growth-factor=${grow ? GROWTH_FACTOR : 1}`);
  };
  const observer = new PerformanceObserver(keep);
  observer.observe({ entryTypes: ['gc'] });
  keep();
  return () => {
    observer.disconnect();
    v8.setFlagsFromString(`--semi-space-growth-factor=${GROWTH_FACTOR}`);
  };
}
