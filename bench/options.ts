/**
 * The command line (BENCH_USAGE below); BENCHMARKS.md says what each scenario measures.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { IdMode } from './ids.js';
import { ROOT } from './layout.js';

/** Every option, resolved; written whole (but `out`) into each result's meta, in this order. */
export interface BenchOptions {
  readonly duration: number;
  readonly warmup: number;
  readonly pairs: number;
  readonly connections: number;
  readonly prefill: number;
  readonly ids: IdMode;
  readonly soak: number;
  readonly store: 'sqlite' | 'postgres';
  readonly quick: boolean;
  /** Reads scenario: page reads and GET by id over a prefilled store, plantstore only. */
  readonly reads: boolean;
  /**
   * Grown-store scenario: durable creates with random ids into an empty store and into stores of these sizes, and
   * reads by id over GROWN_READS_BASE plants and over the largest, all in every pair; empty when not asked for.
   */
  readonly grown: readonly number[];
  /** Bulk scenario: streamed bulk creates (NDJSON) against single creates, in pairs; then latency beside a stream and RSS over 1,000,000 lines. */
  readonly bulk: boolean;
  /** Webhook scenario: plantstore with one subscription (a local receiver) against plantstore with none, in pairs. */
  readonly webhook: boolean;
  /** Also run plantstore's HTTP layer on a store that keeps nothing, in every pair. */
  readonly appOnly: boolean;
  /**
   * --workers N: pairs of plantstore WORKERS=1 and WORKERS=N (with --webhook: each with and without the subscription),
   * every process unpinned; null when not asked for.
   */
  readonly workers: number | null;
  /**
   * With --workers, which workloads each pair runs (each its own WORKERS=1 and WORKERS=N servers): durable creates,
   * GET /plants/{id} over the prefilled store, and 90% of those reads with 10% creates.
   */
  readonly workloads: readonly WorkersWorkload[];
  /** --scrapers N: creates alone, with N connections scraping GET /metrics anonymously, and with a metrics:read token. */
  readonly scrapers: number | null;
  readonly generator: 'auto' | 'wrk' | 'autocannon';
  /**
   * An A/B in one run: a second plantstore, "baseline", in every pair, from another checkout (its root, built) and/or
   * with other settings; null when not asked for. The headline then also says plantstore ÷ baseline.
   */
  readonly baseline: { readonly root: string; readonly env: Readonly<Record<string, string>> } | null;
  /** The checkout whose plantstore is measured (its root, built): this one unless --plantstore names another. */
  readonly plantstoreRoot: string;
  readonly cpuProf: boolean;
  /** Rewrite this scenario's section of BENCHMARKS.md from the run, if the machine was quiet (bench/recorder.ts). */
  readonly record: boolean;
  readonly out: string;
  /** Where the temporary SQLite database lives (default: the OS temp dir); a tmpfs here shows what fsync costs. */
  readonly dbDir: string;
}

const WORKERS_WORKLOADS = ['creates', 'reads', 'mixed'] as const;
export type WorkersWorkload = (typeof WORKERS_WORKLOADS)[number];

/** Plants stored before a --workers run: what reads by id are spread over (the creates add to them). */
const WORKERS_PREFILL = 200_000;

export const BENCH_USAGE = `Usage: npm run bench -- [options]

  --duration S --warmup S --pairs N --connections N     measured seconds, warm-up seconds, pairs, connections
  --prefill N --ids sequential|random                   plants stored before the load, and the ids it sends
  --soak S                                              one long run (memory drift)
  --store sqlite|postgres                               the storage (PostgreSQL: the embedded test server)
  --reads | --webhook | --app-only                      page reads; one webhook subscription; also plantstore's HTTP layer alone
  --bulk                                                streamed bulk creates (NDJSON) against single creates
  --grown N,N,...                                       creates (random ids) into an empty store and stores of N plants; reads by id
  --workers N                                           pairs of WORKERS=1 and WORKERS=N, unpinned (also with --webhook)
  --workload creates|reads|mixed ...                    with --workers: which workloads (default all three)
  --scrapers N                                          creates alone and with N connections scraping /metrics (with --workers: WORKERS=N)
  --generator auto|wrk|autocannon                       the load generator
  --baseline DIR --baseline-env NAME=VALUE ...          an A/B in one run: another built checkout and/or settings
  --plantstore DIR                                      measure another built checkout's plantstore
  --record                                              rewrite the scenario's section of BENCHMARKS.md (quiet machine only)
  --quick --cpu-prof --out DIR --db-dir DIR --help
`;

/** A command line the bench cannot run: the entry point prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The options, or null when --help asked for the usage text. */
export function readOptions(argv: string[]): BenchOptions | null {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        duration: { type: 'string' },
        warmup: { type: 'string' },
        pairs: { type: 'string' },
        connections: { type: 'string' },
        prefill: { type: 'string' },
        ids: { type: 'string' },
        soak: { type: 'string' },
        store: { type: 'string' },
        quick: { type: 'boolean' },
        reads: { type: 'boolean' },
        bulk: { type: 'boolean' },
        grown: { type: 'string' },
        webhook: { type: 'boolean' },
        'app-only': { type: 'boolean' },
        workers: { type: 'string' },
        workload: { type: 'string', multiple: true },
        scrapers: { type: 'string' },
        generator: { type: 'string' },
        baseline: { type: 'string' },
        'baseline-env': { type: 'string', multiple: true },
        plantstore: { type: 'string' },
        'cpu-prof': { type: 'boolean' },
        record: { type: 'boolean' },
        out: { type: 'string' },
        'db-dir': { type: 'string' },
        help: { type: 'boolean' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values } = parsed;
  if (values.help) return null;
  const num = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) throw new UsageError(`--${name} must be a number >= ${min}, got ${JSON.stringify(raw)}`);
    return value;
  };
  const quick = values.quick ?? false;
  const soak = num('soak', values.soak, 0, 0);
  const ids = values.ids ?? 'sequential';
  if (ids !== 'sequential' && ids !== 'random') throw new UsageError('--ids must be sequential or random');
  const store = values.store ?? 'sqlite';
  if (store !== 'sqlite' && store !== 'postgres') throw new UsageError('--store must be sqlite or postgres');
  const generator = values.generator ?? 'auto';
  if (generator !== 'auto' && generator !== 'wrk' && generator !== 'autocannon') {
    throw new UsageError('--generator must be auto, wrk or autocannon');
  }
  const reads = values.reads ?? false;
  if (reads && soak > 0) throw new UsageError('--reads and --soak do not combine');
  const baselineEnv: Record<string, string> = {};
  for (const pair of values['baseline-env'] ?? []) {
    const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/s.exec(pair);
    if (!match) throw new UsageError(`--baseline-env takes NAME=VALUE, got ${JSON.stringify(pair)}`);
    baselineEnv[match[1] as string] = match[2] as string;
  }
  const wantsBaseline = values.baseline !== undefined || Object.keys(baselineEnv).length > 0;
  if (wantsBaseline && (reads || store !== 'sqlite')) throw new UsageError('--baseline compares creates on SQLite only');
  const webhook = values.webhook ?? false;
  if (webhook && (reads || soak > 0 || values['app-only'] || wantsBaseline)) {
    throw new UsageError('--webhook does not combine with --reads, --soak, --app-only or --baseline');
  }
  const workers = values.workers === undefined ? null : num('workers', values.workers, 2, 2);
  if (workers !== null && !Number.isInteger(workers)) throw new UsageError(`--workers must be a whole number >= 2, got ${JSON.stringify(values.workers)}`);
  if (workers !== null && (reads || soak > 0 || values['app-only'] || wantsBaseline)) {
    throw new UsageError('--workers does not combine with --reads, --soak, --app-only or --baseline');
  }
  const workloads = (values.workload ?? [...WORKERS_WORKLOADS]) as WorkersWorkload[];
  for (const workload of workloads) {
    if (!WORKERS_WORKLOADS.includes(workload)) throw new UsageError(`--workload must be one of ${WORKERS_WORKLOADS.join(', ')}, got ${JSON.stringify(workload)}`);
  }
  if (values.workload !== undefined && (workers === null || webhook)) throw new UsageError('--workload goes with --workers (without --webhook)');
  // Reads by id need plants to read: with --workers (not --webhook) the store is prefilled unless --prefill says otherwise.
  const readsWithWorkers = workers !== null && !webhook && workloads.some((workload) => workload !== 'creates');
  const scrapers = values.scrapers === undefined ? null : num('scrapers', values.scrapers, 4, 1);
  if (scrapers !== null && !Number.isInteger(scrapers)) throw new UsageError(`--scrapers must be a whole number >= 1, got ${JSON.stringify(values.scrapers)}`);
  if (scrapers !== null && (reads || soak > 0 || webhook || values['app-only'] || wantsBaseline)) {
    throw new UsageError('--scrapers does not combine with --reads, --soak, --webhook, --app-only or --baseline');
  }
  const grown = values.grown === undefined ? [] : values.grown.split(',').map((size) => num('grown', size, 0, 1000));
  if (grown.length > 0 && (reads || soak > 0 || webhook || workers !== null || scrapers !== null || wantsBaseline || values.bulk || store !== 'sqlite')) {
    throw new UsageError('--grown runs on SQLite alone, without --reads, --soak, --webhook, --workers, --scrapers, --bulk or --baseline');
  }
  return {
    duration: soak > 0 ? soak : num('duration', values.duration, quick ? 1 : 10, 0.5),
    warmup: num('warmup', values.warmup, quick ? 0.5 : 3, 0),
    pairs: soak > 0 ? 1 : Math.round(num('pairs', values.pairs, quick || reads ? 1 : 3, 1)),
    connections: Math.round(num('connections', values.connections, 50, 1)),
    prefill: Math.round(
      num('prefill', values.prefill, reads ? (quick ? 1000 : 5_000_000) : readsWithWorkers ? (quick ? 1000 : WORKERS_PREFILL) : 0, reads || readsWithWorkers ? 1 : 0),
    ),
    ids,
    soak,
    store,
    quick,
    reads,
    bulk: values.bulk ?? false,
    grown: grown.map(Math.round),
    webhook,
    appOnly: values['app-only'] ?? false,
    workers,
    workloads: workers !== null && !webhook ? workloads : [],
    scrapers,
    generator,
    baseline: wantsBaseline ? { root: path.resolve(values.baseline ?? ROOT), env: baselineEnv } : null,
    plantstoreRoot: path.resolve(values.plantstore ?? ROOT),
    cpuProf: values['cpu-prof'] ?? false,
    record: values.record ?? false,
    out: path.resolve(values.out ?? path.join(ROOT, 'bench/results')),
    dbDir: path.resolve(values['db-dir'] ?? os.tmpdir()),
  };
}

/** What the store holds and which ids the load sends, e.g. "prefill 5000000 random ids". */
export function workloadTitle(options: BenchOptions): string {
  if (options.soak > 0) return `soak ${options.soak}s`;
  if (options.grown.length > 0) return `an empty store and stores of ${options.grown.join(', ')} plants, random ids`;
  return options.prefill > 0 ? `prefill ${options.prefill} ${options.ids} ids` : `empty store, ${options.ids} ids`;
}

/** The command as typed, for the report. */
export function commandLine(): string {
  return `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim();
}
