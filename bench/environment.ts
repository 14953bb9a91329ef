/**
 * The conditions of a run, set up once and written into every result: which cores the servers and the load get
 * (taskset), the machine, and the commit measured.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import os from 'node:os';
import { ROOT } from './layout.js';

export interface Pinning {
  /** Command prefixes that pin what they run: servers to core 0, the load generator to core 1. */
  readonly server: readonly string[];
  readonly load: readonly string[];
  readonly note: string;
}

export function pinning(): Pinning {
  const taskset = spawnSync('taskset', ['-V'], { encoding: 'utf8' });
  if (taskset.error || taskset.status !== 0) {
    return { server: [], load: [], note: 'taskset not found (util-linux): processes NOT pinned, figures are not comparable' };
  }
  if (os.availableParallelism() < 2) {
    return { server: ['taskset', '-c', '0'], load: ['taskset', '-c', '0'], note: 'one CPU only: server and load share core 0' };
  }
  return { server: ['taskset', '-c', '0'], load: ['taskset', '-c', '1'], note: 'servers on core 0 (taskset -c 0), load on core 1 (taskset -c 1)' };
}

/** --workers: every process may run on every core, as a deployment runs them. */
export function unpinned(): Pinning {
  return { server: [], load: [], note: 'none (--workers): the servers and the load generator share every core' };
}

export function spawnPinned(prefix: readonly string[], command: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  const [first, ...rest] = prefix;
  // taskset execs the command, so the child's pid is the command's own pid (for /proc sampling).
  return first === undefined ? spawn(command, args, options) : spawn(first, [...rest, command, ...args], options);
}

export interface Machine {
  readonly nproc: number;
  readonly cpu: string;
  readonly memoryGb: number;
  readonly kernel: string;
  readonly node: string;
  readonly loadAverageAtEnd: number[];
}

/** The machine now: called when a result is written, so the load average is the one at the end of the runs. */
export function machine(): Machine {
  return {
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 1e9),
    kernel: os.release(),
    node: process.version,
    loadAverageAtEnd: os.loadavg().map((n) => Math.round(n * 100) / 100),
  };
}

function git(args: string[]): string {
  const result = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : '';
}

/** The commit measured, and whether src/ differs from it. */
export function sourceRevision(): { readonly commit: string; readonly workingTreeDirty: boolean } {
  return { commit: git(['rev-parse', '--short', 'HEAD']), workingTreeDirty: git(['status', '--porcelain', '--', 'src']) !== '' };
}
