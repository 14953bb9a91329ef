/**
 * The load generator: wrk with a Lua script (./wrk.ts) when `wrk` is on PATH, otherwise autocannon in a child
 * process of its own (./load.ts); either runs pinned to the load core and answers one LoadResult per run.
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { spawnPinned, type Pinning } from './environment.js';
import { AUTOCANNON_LOAD } from './layout.js';
import type { LoadResult, LoadSpec } from './load.js';
import { UsageError, type BenchOptions } from './options.js';
import { runWrk, WRK_THREADS } from './wrk.js';

export interface LoadGenerator {
  readonly kind: 'wrk' | 'autocannon';
  /** e.g. "wrk debian/4.1.0-3+b2 (1 thread, Lua script)". */
  readonly description: string;
  /** Why this one was chosen. */
  readonly note: string;
}

export function chooseGenerator(wanted: BenchOptions['generator']): LoadGenerator {
  const probe = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  // wrk --version prints its banner and exits 1.
  const version = /^wrk (\S+)/m.exec(`${probe.stdout ?? ''}${probe.stderr ?? ''}`)?.[1];
  if (wanted === 'wrk' && !version) throw new UsageError('--generator wrk: wrk is not on PATH');
  if (version && wanted !== 'autocannon') {
    return {
      kind: 'wrk',
      description: `wrk ${version} (${WRK_THREADS} thread, Lua script: a distinct id per request, statuses counted in response())`,
      note: 'wrk found on PATH',
    };
  }
  return {
    kind: 'autocannon',
    description: 'autocannon (programmatic, one child process)',
    note: version ? 'wrk is installed but --generator autocannon was given' : 'wrk not installed',
  };
}

export interface GeneratorPlace {
  readonly pinning: Pinning;
  /** A folder of the bench's own: wrk's Lua scripts are written there. */
  readonly scriptDir: string;
}

/** One run of the generator against `spec.url`, to completion. */
export function runGenerator(generator: LoadGenerator, spec: LoadSpec, place: GeneratorPlace): Promise<LoadResult> {
  return generator.kind === 'wrk'
    ? runWrk(spec, { scriptDir: place.scriptDir, pinPrefix: place.pinning.load, description: generator.description })
    : runAutocannon(spec, place.pinning);
}

async function runAutocannon(spec: LoadSpec, pin: Pinning): Promise<LoadResult> {
  const child = spawnPinned(pin.load, process.execPath, [AUTOCANNON_LOAD, JSON.stringify(spec)], {
    env: { ...process.env, NODE_OPTIONS: '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`load generator exited with ${code}`);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as LoadResult;
}
