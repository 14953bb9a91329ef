/**
 * The default scenario: durable POST /plants, every request a fresh id, on an empty or prefilled store. Each pair
 * runs the ceiling, then (--app-only) plantstore's HTTP layer on a store that keeps nothing, then plantstore, each
 * after its own warm-up; the headline is the median of the per-pair ratios to the ceiling. Afterwards every 2xx
 * plantstore gave must be in the store. A soak (./soak.ts) is one long pair of this.
 */
import fs from 'node:fs';
import type { LoadResult } from '../load.js';
import { Sequence } from '../measure.js';
import { mb, median, procStatusKb, ratio3 } from '../metrics.js';
import { workloadTitle } from '../options.js';
import { headerLines, markdownTable, measuredColumns, progressLine, runMeta, writeReport, LOAD_BOUND_PERCENT, type Column, type MeasuredRow } from '../report.js';
import { cliToken, type BenchServer, type ServerName } from '../servers.js';
import { withSession, type BenchSession, type BenchSetup } from '../session.js';
import { SOAK_RSS_SAMPLE_EVERY_MS, soakLabel, soakLines, soakSummary } from './soak.js';

interface WarmupCounts {
  readonly responses: number;
  readonly ok: number;
  readonly non2xx: number;
  readonly errors: number;
}

/** One measured run of one server, as the results file records it. */
interface RunRecord extends MeasuredRow {
  readonly pair: number;
  readonly server: ServerName;
  readonly load: LoadResult;
  readonly warmup: WarmupCounts;
  /** Highest VmRSS sampled during the measured run, and the process's VmHWM after it, in MB. */
  readonly rssPeakMb: number;
  readonly hwmMb: number;
  readonly serverCpuPercent: number;
  readonly serverCpuMicrosPerRequest: number;
  /** VmRSS samples (MB) during the measured run (soak). */
  readonly rssSamplesMb: number[];
  /** req/s over the same pair's ceiling's; not for the ceiling itself. */
  ratio?: number;
}

/** Per pair, `name`'s req/s over `over`'s: the A/B figures (plantstore ÷ app-only, plantstore ÷ baseline). */
function medianPairRatio(runs: readonly RunRecord[], pairs: number, name: ServerName, over: ServerName): number | null {
  const ratios: number[] = [];
  for (let pair = 1; pair <= pairs; pair += 1) {
    const a = runs.find((run) => run.pair === pair && run.server === name);
    const b = runs.find((run) => run.pair === pair && run.server === over);
    if (a && b && b.load.reqPerSec > 0) ratios.push(a.load.reqPerSec / b.load.reqPerSec);
  }
  return ratios.length ? ratio3(median(ratios)) : null;
}

/** Per pair, `over`'s CPU per request over `name`'s: the A/B of cost, steadier than req/s on a shared machine. */
function medianPairCpuRatio(runs: readonly RunRecord[], pairs: number, name: ServerName, over: ServerName): number | null {
  const ratios: number[] = [];
  for (let pair = 1; pair <= pairs; pair += 1) {
    const a = runs.find((run) => run.pair === pair && run.server === name);
    const b = runs.find((run) => run.pair === pair && run.server === over);
    if (a && b && a.serverCpuMicrosPerRequest > 0) ratios.push(b.serverCpuMicrosPerRequest / a.serverCpuMicrosPerRequest);
  }
  return ratios.length ? ratio3(median(ratios)) : null;
}

const COLUMNS: ReadonlyArray<Column<RunRecord>> = [
  { header: 'pair', numeric: true, cell: (run) => String(run.pair) },
  { header: 'server', numeric: false, cell: (run) => run.server },
  ...measuredColumns<RunRecord>(),
  { header: 'ratio', numeric: true, cell: (run) => (run.ratio === undefined ? '' : run.ratio.toFixed(3)) },
];

/** The results file's name after its date, e.g. sqlite-prefill5000000-random or postgres-empty-sequential-quick. */
function label(setup: BenchSetup): string {
  const { options } = setup;
  const workload = options.soak > 0 ? soakLabel(options.soak) : options.prefill > 0 ? `prefill${options.prefill}-${options.ids}` : `empty-${options.ids}`;
  return [options.store, workload, options.quick ? 'quick' : ''].filter(Boolean).join('-');
}

interface PairsContext {
  readonly session: BenchSession;
  readonly token: string;
  readonly servers: readonly BenchServer[];
  readonly sequence: Sequence;
}

/** Every pair, in order: each server warmed up, then measured; ratios against the pair's ceiling. */
async function runPairs({ session, token, servers, sequence }: PairsContext): Promise<RunRecord[]> {
  const { options, log } = session.setup;
  const load = {
    token,
    connections: options.connections,
    ids: options.ids,
    offset: options.ids === 'sequential' ? options.prefill : 0,
    sequence,
  };
  const runs: RunRecord[] = [];
  for (let pair = 1; pair <= options.pairs; pair += 1) {
    let ceilingRun: RunRecord | undefined;
    for (const server of servers) {
      let warmup: WarmupCounts = { responses: 0, ok: 0, non2xx: 0, errors: 0 };
      if (options.warmup > 0) {
        const w = await session.runLoad({ ...load, server, seconds: options.warmup, rssSampleEveryMs: 0 });
        warmup = { responses: w.load.responses, ok: w.load.ok, non2xx: w.load.non2xx, errors: w.load.errors + w.load.timeouts };
      }
      const m = await session.runLoad({
        ...load,
        server,
        seconds: options.duration,
        rssSampleEveryMs: options.soak > 0 ? SOAK_RSS_SAMPLE_EVERY_MS : 0,
      });
      const record: RunRecord = {
        pair,
        server: server.name,
        load: m.load,
        warmup,
        rssPeakMb: mb(m.rssPeakKb),
        hwmMb: mb(procStatusKb(server.pid, 'VmHWM') ?? 0),
        serverCpuPercent: m.serverCpuPercent,
        serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
        rssSamplesMb: m.rssSamplesKb.map(mb),
      };
      if (server.name === 'ceiling') ceilingRun = record;
      else if (ceilingRun) record.ratio = ratio3(m.load.reqPerSec / ceilingRun.load.reqPerSec);
      runs.push(record);
      log(progressLine(`pair ${pair} ${server.name.padEnd(10)}`, record) + (record.ratio === undefined ? '' : `  ratio ${record.ratio.toFixed(3)}`));
    }
  }
  return runs;
}

/** Per pair, ceiling CPU per request over `name`'s: the ratio with other tenants' CPU theft taken out. */
function medianCpuRatio(runs: readonly RunRecord[], pairs: number, name: ServerName): number | null {
  const cpuRatios: number[] = [];
  for (let pair = 1; pair <= pairs; pair += 1) {
    const ceiling = runs.find((run) => run.pair === pair && run.server === 'ceiling');
    const other = runs.find((run) => run.pair === pair && run.server === name);
    if (ceiling && other && other.serverCpuMicrosPerRequest > 0) cpuRatios.push(ceiling.serverCpuMicrosPerRequest / other.serverCpuMicrosPerRequest);
  }
  return cpuRatios.length ? ratio3(median(cpuRatios)) : null;
}

const medianRatio = (runs: readonly RunRecord[]) => {
  const ratios = runs.map((run) => run.ratio).filter((r): r is number => r !== undefined);
  return ratios.length ? ratio3(median(ratios)) : null;
};

export function runCreates(setup: BenchSetup): Promise<void> {
  const { options } = setup;
  return withSession(setup, async (session) => {
    const { store } = session;
    const plantsBefore = await store.countPlants().catch(() => 0);
    const token = cliToken(store.databaseUrl, session.plantstoreCli);
    const ceiling = await session.startTokenServer('ceiling', token);
    const appOnly = options.appOnly ? await session.startTokenServer('app-only', token) : undefined;
    const baseline = await session.startBaseline();
    const plantstore = await session.startPlantstore();

    const servers = [ceiling, ...(appOnly ? [appOnly] : []), ...(baseline ? [baseline] : []), plantstore];
    const runs = await runPairs({ session, token, servers, sequence: new Sequence() });

    const plantstoreHwm = mb(procStatusKb(plantstore.pid, 'VmHWM') ?? 0);
    const codes = {
      ceiling: await session.stop(ceiling),
      ...(appOnly ? { appOnly: await session.stop(appOnly) } : {}),
      ...(baseline ? { baseline: await session.stop(baseline) } : {}),
      plantstore: await session.stop(plantstore),
    };
    const plantsAfter = await store.countPlants();
    const logFile = session.logFile;
    const logLines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean).length : 0;

    const psRuns = runs.filter((run) => run.server === 'plantstore');
    const plantstoreOk = psRuns.reduce((n, run) => n + run.warmup.ok + run.load.ok, 0);
    const summary = {
      medianRatio: medianRatio(psRuns),
      plantstoreMedianReqPerSec: median(psRuns.map((r) => r.load.reqPerSec)),
      ceilingMedianReqPerSec: median(runs.filter((r) => r.server === 'ceiling').map((r) => r.load.reqPerSec)),
      medianCpuRatio: medianCpuRatio(runs, options.pairs, 'plantstore'),
      appOnlyMedianRatio: medianRatio(runs.filter((run) => run.server === 'app-only')),
      appOnlyMedianCpuRatio: appOnly ? medianCpuRatio(runs, options.pairs, 'app-only') : null,
      plantstoreOverAppOnly: appOnly ? medianPairRatio(runs, options.pairs, 'plantstore', 'app-only') : null,
      baselineMedianRatio: medianRatio(runs.filter((run) => run.server === 'baseline')),
      plantstoreOverBaseline: baseline ? medianPairRatio(runs, options.pairs, 'plantstore', 'baseline') : null,
      plantstoreOverBaselineCpu: baseline ? medianPairCpuRatio(runs, options.pairs, 'plantstore', 'baseline') : null,
      plantstoreMedianP99Ms: median(psRuns.map((r) => r.load.latency.p99)),
      plantstorePeakRssMb: Math.max(...psRuns.map((r) => r.rssPeakMb)),
      plantstoreVmHwmMb: plantstoreHwm,
      plantstoreNon2xx: psRuns.reduce((n, r) => n + r.load.non2xx + r.warmup.non2xx, 0),
      plantstoreErrors: psRuns.reduce((n, r) => n + r.load.errors + r.load.timeouts + r.warmup.errors, 0),
      plantstoreOk,
      plantsBefore,
      plantsAfter,
      // Requests in flight when a run's clock stops are committed but never counted: at most one per connection per run.
      everyOkStored:
        plantsAfter - plantsBefore >= plantstoreOk &&
        plantsAfter - plantsBefore <= plantstoreOk + options.connections * options.pairs * (options.warmup > 0 ? 2 : 1),
      ...soakSummary(psRuns.flatMap((run) => run.rssSamplesMb)),
      plantstoreLogLines: logLines,
      exitCodes: codes,
    };
    const meta = runMeta(setup, workloadTitle(options), store.description);

    const lines = [
      ...headerLines(meta, `${options.pairs} pair(s) × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections`),
      ...markdownTable(COLUMNS, runs),
      '',
      ...soakLines(summary),
      // With a baseline the comparison is the run's figure, so it comes first: its bold opens the line (BENCHMARKS.md's headline).
      ...(options.baseline
        ? [
            `**plantstore ÷ baseline, per pair: ${summary.plantstoreOverBaseline ?? 'n/a'} req/s, ${summary.plantstoreOverBaselineCpu ?? 'n/a'} CPU cost (baseline µs/req ÷ plantstore µs/req)** · ` +
              `baseline (${options.baseline.root}${Object.keys(options.baseline.env).length ? `, ${Object.entries(options.baseline.env).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''}): ` +
              `median ratio ${summary.baselineMedianRatio ?? 'n/a'}`,
          ]
        : []),
      `**Median ratio plantstore/ceiling: ${summary.medianRatio ?? 'n/a'}** · plantstore median ${summary.plantstoreMedianReqPerSec} req/s, p99 ${summary.plantstoreMedianP99Ms} ms · ceiling median ${summary.ceilingMedianReqPerSec} req/s · CPU-cost ratio (ceiling µs/req ÷ plantstore µs/req, median): ${summary.medianCpuRatio ?? 'n/a'}`,
      `plantstore: peak RSS ${summary.plantstorePeakRssMb} MB (VmHWM ${summary.plantstoreVmHwmMb} MB), non-2xx ${summary.plantstoreNon2xx}, errors ${summary.plantstoreErrors}, ` +
        `${summary.plantstoreOk} answered 2xx, plants stored ${summary.plantsBefore} → ${summary.plantsAfter} (${summary.everyOkStored ? 'every 2xx is stored; the few extra are requests cut off in flight at the end of a run' : 'MISMATCH with the 2xx count'}), ` +
        `${summary.plantstoreLogLines} log lines, exit codes ${Object.entries(codes).map(([name, code]) => `${name} ${code}`).join(' ')}`,
      ...(appOnly
        ? [
            `app-only (plantstore's HTTP layer, storing nothing): median ratio ${summary.appOnlyMedianRatio ?? 'n/a'}, CPU-cost ratio ${summary.appOnlyMedianCpuRatio ?? 'n/a'}; ` +
              `**durable ÷ app-only, per pair: ${summary.plantstoreOverAppOnly ?? 'n/a'}**`,
          ]
        : []),
      ...(runs.some((run) => run.load.cpuPercent >= LOAD_BOUND_PERCENT)
        ? [`⚠ load CPU ≥ ${LOAD_BOUND_PERCENT}%: the load generator saturated its core in that run, so its req/s is a floor for the server's capacity, not the capacity.`]
        : []),
      '',
    ];
    const chart = {
      title: `Durable creates, ${workloadTitle(options)} (${options.store}): req/s per pair`,
      subtitle:
        `median plantstore ÷ ceiling ${summary.medianRatio ?? 'n/a'}` +
        (summary.plantstoreOverAppOnly !== null ? ` · ÷ app-only ${summary.plantstoreOverAppOnly}` : '') +
        (summary.plantstoreOverBaseline !== null ? ` · ÷ baseline ${summary.plantstoreOverBaseline}` : '') +
        ` · ${meta.commit}, Node ${meta.machine.node}`,
      unit: 'req/s',
      groups: Array.from({ length: options.pairs }, (_, index) => ({
        label: options.soak > 0 ? `soak ${options.soak} s` : `pair ${index + 1}`,
        bars: runs.filter((run) => run.pair === index + 1).map((run) => ({ series: run.server, value: run.load.reqPerSec })),
      })),
    };
    writeReport(options.out, { result: { meta, summary, runs }, markdown: lines.join('\n'), label: label(setup), chart });
  });
}
