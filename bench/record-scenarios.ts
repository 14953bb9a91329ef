/**
 * The scenarios BENCHMARKS.md records, one section each, in the page's order.
 *
 * `epoch` says when a section is older than the code it measures: bump a scenario's epoch in the commit whose change
 * is meant to move its figure (or changes what the scenario runs), and test/unit/bench-record.test.ts fails until the
 * section is recorded again with `--record`. A rule from git alone (any commit touching src/ makes every section
 * stale) would fail on nearly every commit; the epoch is the author's statement that a figure moved.
 */
import type { BenchOptions } from './options.js';

export interface Scenario {
  readonly name: string;
  readonly title: string;
  /** What it measures, for the section's first paragraph. */
  readonly measures: string;
  /** The command that records it. */
  readonly command: string;
  readonly epoch: number;
}

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'creates',
    title: 'Creates: durable and app-only',
    measures:
      'Durable `POST /plants` on SQLite against a bare `node:http` server that parses and checks the same body (the ceiling), and against plantstore\'s HTTP layer on a store that keeps nothing (app-only); servers pinned to core 0, wrk on core 1, 50 connections. The headline is the median of the per-pair ratios to the ceiling.',
    command: 'npm run bench -- --app-only --record',
    epoch: 2,
  },
  {
    name: 'metrics',
    title: 'Metrics: on ÷ off',
    measures: 'Durable creates with metrics on against the same build with `METRICS=off`, in every pair: what the metrics cost.',
    command: 'npm run bench -- --baseline-env METRICS=off --record',
    epoch: 1,
  },
  {
    name: 'tracing',
    title: 'Tracing',
    measures: 'Durable creates with tracing configured and sampling nothing against tracing off: what configured tracing costs a create it does not sample.',
    command:
      'npm run bench -- --baseline-env OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 --baseline-env OTEL_TRACES_SAMPLER=traceidratio --baseline-env OTEL_TRACES_SAMPLER_ARG=0 --record',
    epoch: 1,
  },
  {
    name: 'soak',
    title: 'Soak and memory',
    measures: 'One long run of durable creates, RSS sampled every 5 s: whether memory stays flat.',
    command: 'npm run bench -- --soak 60 --record',
    epoch: 1,
  },
  {
    name: 'postgres',
    title: 'PostgreSQL',
    measures: 'Durable creates on the embedded PostgreSQL against the ceiling and app-only (its processes unpinned, sharing the load core).',
    command: 'npm run bench -- --store postgres --app-only --pairs 3 --record',
    epoch: 1,
  },
  {
    name: 'reads',
    title: 'Reads',
    measures: 'plantstore alone: the first and a deep page of `GET /plants`, with and without `tag=`, and `GET /plants/{id}` over 5 million stored plants.',
    command: 'npm run bench -- --reads --prefill 5000000 --ids sequential --record',
    epoch: 1,
  },
  {
    name: 'grown',
    title: 'Grown stores: 2 and 10 million plants',
    measures:
      'Durable creates with random ids into an empty store, into 2,000,000 and into 10,000,000 plants (prefilled in random order), then `GET /plants/{id}` over 200,000 and over 10,000,000 on stores that take no creates; each store on its own plantstore, ratios per pair to the same build\'s empty store; peak RSS and each file against a packed copy.',
    command: 'npm run bench -- --grown 2000000,10000000 --record',
    epoch: 3,
  },
  {
    name: 'webhook',
    title: 'Webhook',
    measures: 'Durable creates with one webhook subscription (a local receiver answering 204) against none; every acknowledged event is checked to arrive.',
    command: 'npm run bench -- --webhook --record',
    epoch: 1,
  },
  {
    name: 'workers',
    title: 'Worker threads: `WORKERS`',
    measures: 'Durable creates, `GET /plants/{id}` over 200,000 plants, and 90% reads with 10% creates, each with `WORKERS=1` then `WORKERS=2`, nothing pinned.',
    command: 'npm run bench -- --workers 2 --pairs 3 --record',
    epoch: 1,
  },
  {
    name: 'bulk',
    title: 'Bulk creates: streamed NDJSON',
    measures: 'Four concurrent NDJSON bulk creates against single creates on the same server: plants/s, server CPU per plant, and RSS over a 1,000,000-line request.',
    command: 'npm run bench -- --bulk --record',
    epoch: 1,
  },
  {
    name: 'bulk-overload',
    title: 'Bulk streams under overload',
    measures:
      'A real `plantstore serve` on its defaults under bulk streams: 20 concurrent streams of 50,000 lines from one token beside a single create every 100 ms; one request of 10,000,000 blank lines; five requests of 1,000,000 lines; SIGTERM 2 s into a 2,000,000-line stream. Lines refused, throughput, the slowest single create, RSS growth, and the stream\'s end at shutdown.',
    command: 'node dist/bench/bulk-overload.js --record',
    epoch: 2,
  },
  {
    name: 'clients',
    title: 'Real clients alone and under contention',
    measures:
      'A real `plantstore serve` on its defaults, each real HTTP client (Node `fetch`, undici `Pool`, `aiohttp`, `requests`, Go `net/http`, `ab -k`, `curl --parallel`) alone at 16, 100 and 1,000 concurrent creates from one address, a fresh server each: creates/s, the rate at 1,000 ÷ at 16, the slowest answer, non-2xx and transport errors; then an undici Pool on 10 connections alone and beside one on 1,000 from another address.',
    command: 'node dist/bench/clients.js --record',
    epoch: 1,
  },
  {
    name: 'scrapers',
    title: 'Metrics under scrapers',
    measures: 'Durable creates alone, then with 4 connections scraping `/metrics` anonymously, then with a `metrics:read` token.',
    command: 'npm run bench -- --scrapers 4 --pairs 3 --record',
    epoch: 1,
  },
  {
    name: 'feed',
    title: 'Change feed',
    measures:
      'One plantstore with 1,000 `GET /plants/events` streams open: the fan-out delay from a create\'s 200 to its event at every stream (idle and under load), durable creates/s with the streams reading ÷ without, RSS per idle stream, and creates/s beside 1,000 streams that never read.',
    command: 'node dist/bench/feed.js 1000 5 --record',
    epoch: 1,
  },
  {
    name: 'data-movement',
    title: 'Data movement',
    measures: '`plantstore export`, `import` and `copy` (to the embedded PostgreSQL) over 1,000,000 plants, each a real CLI process: wall time, CPU time and peak RSS.',
    command: 'node dist/bench/data-movement.js --rows 1000000 --record',
    epoch: 1,
  },
  {
    name: 'commit-ceiling',
    title: "The writer's commit ceiling",
    measures: "The main thread's commits alone, fed by threads standing in for workers: creates/s, rows per commit and the main thread's CPU per commit, by batch size.",
    command: 'npm run bench:commits -- --record',
    epoch: 1,
  },
  {
    name: 'start-window',
    title: "Node's own start: the signal window",
    measures: "How long Node takes from `spawn()` to a module's first statement, where the bin installs its signal handlers, and whether a SIGHUP sent in that window ends the process.",
    command: 'node dist/bench/start-window.js --record',
    epoch: 1,
  },
];

export function scenario(name: string): Scenario | undefined {
  return SCENARIOS.find((candidate) => candidate.name === name);
}

/**
 * Which section a `npm run bench` command line records, or why it records none: an A/B against another checkout,
 * a quick smoke run or settings no section names are comparisons, not the current figure of a scenario.
 */
export function benchScenario(options: BenchOptions, root: string): { name: string } | { refused: string } {
  if (options.quick) return { refused: '--quick is a smoke run' };
  if (options.baseline && options.baseline.root !== root) return { refused: '--baseline DIR compares two checkouts; a section holds this one' };
  if (options.plantstoreRoot !== root) return { refused: '--plantstore measures another checkout' };
  const env = options.baseline?.env ?? {};
  if (options.grown.length > 0) return { name: 'grown' };
  if (options.bulk) return { name: 'bulk' };
  if (options.reads) return { name: 'reads' };
  if (options.webhook) return options.workers ? { refused: 'no section holds --webhook with --workers' } : { name: 'webhook' };
  if (options.scrapers !== null) return { name: 'scrapers' };
  if (options.workers !== null) return { name: 'workers' };
  if (options.soak > 0) return { name: 'soak' };
  if (options.store === 'postgres') return { name: 'postgres' };
  if (env.METRICS === 'off' && Object.keys(env).length === 1) return { name: 'metrics' };
  if (env.OTEL_TRACES_SAMPLER !== undefined) return { name: 'tracing' };
  if (Object.keys(env).length > 0) return { refused: 'no section holds these --baseline-env settings' };
  if (options.prefill > 0) return { refused: 'no section holds prefilled creates: --grown measures grown stores' };
  return { name: 'creates' };
}
