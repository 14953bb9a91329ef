/**
 * `npm run bench`: durable POST /plants throughput of plantstore against a bare node:http ceiling.
 *
 * Both servers are child processes pinned to core 0 (`taskset -c 0`); the load generator (wrk with a Lua script when
 * `wrk` is on PATH, autocannon otherwise; in a child pinned to core 1) drives 50 keep-alive connections, every
 * request a fresh id. Runs are interleaved (ceiling, plantstore, ceiling, plantstore, ...), each after its own
 * warm-up, and the median of the per-pair ratios is the headline. Results go to bench/results/ as JSON and markdown;
 * the table is printed. Options are in ./options.ts.
 *
 * This file only wires the parts together:
 *   options.ts       the command line
 *   environment.ts   pinning, machine, commit          generator.ts  wrk or autocannon
 *   session.ts       one invocation's folder, store and servers (stores.ts, prefill.ts, servers.ts)
 *   measure.ts       one load run with /proc sampling (metrics.ts)
 *   scenarios/       creates.ts (ceiling/app-only/plantstore pairs), soak.ts, reads.ts, webhook.ts, workers.ts, scrapers.ts,
 *                    grown.ts (creates into grown stores, reads by id over them)
 *   report.ts        meta, markdown tables, the result files
 *   recorder.ts      --record: the machine's quietness and the scenario's section of BENCHMARKS.md (record.ts)
 */
import fs from 'node:fs';
import path from 'node:path';
import { pinning, unpinned } from './environment.js';
import { chooseGenerator } from './generator.js';
import { PROGRAMS, ROOT } from './layout.js';
import { BENCH_USAGE, readOptions, UsageError, workloadTitle } from './options.js';
import { benchScenario } from './record-scenarios.js';
import { RecordRefused, startRecording } from './recorder.js';
import { runBulk } from './scenarios/bulk.js';
import { runCreates } from './scenarios/creates.js';
import { runGrown } from './scenarios/grown.js';
import { runReads } from './scenarios/reads.js';
import { runScrapers } from './scenarios/scrapers.js';
import { runWebhook } from './scenarios/webhook.js';
import { runWorkers } from './scenarios/workers.js';
import type { BenchSetup } from './session.js';

const log = (line: string) => process.stderr.write(`${line}\n`);

async function main(): Promise<void> {
  const options = readOptions(process.argv.slice(2));
  if (!options) {
    process.stdout.write(BENCH_USAGE);
    return;
  }
  for (const file of PROGRAMS) if (!fs.existsSync(file)) throw new UsageError(`${path.relative(ROOT, file)} is missing: run npm run build`);
  if (options.record) {
    const chosen = benchScenario(options, ROOT);
    if ('refused' in chosen) throw new UsageError(`--record: ${chosen.refused}`);
    await startRecording(chosen.name, log);
  }
  const setup: BenchSetup = { options, pinning: options.workers ? unpinned() : pinning(), generator: chooseGenerator(options.generator), log };
  log(`bench: ${workloadTitle(options)} on ${options.store}; ${options.pairs} pair(s) x ${options.duration}s after ${options.warmup}s warm-up; ${options.connections} connections`);
  log(`bench: ${setup.pinning.note}; load generator: ${setup.generator.description} (${setup.generator.note})`);
  await (options.grown.length > 0
    ? runGrown(setup)
    : options.bulk
    ? runBulk(setup)
    : options.reads
    ? runReads(setup)
    : options.webhook
      ? runWebhook(setup)
      : options.scrapers
        ? runScrapers(setup)
        : options.workers
          ? runWorkers(setup)
          : runCreates(setup));
}

main().catch((error: unknown) => {
  if (error instanceof UsageError) {
    process.stderr.write(`bench: ${error.message}\n\n${BENCH_USAGE}`);
    process.exit(2);
  }
  if (error instanceof RecordRefused) {
    process.stderr.write(`bench: --record: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
