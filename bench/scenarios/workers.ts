/**
 * `--workers N`: what more worker threads buy on this machine. Each pair runs plantstore with WORKERS=1, then with
 * WORKERS=N, each freshly started on the session's store, warmed up, measured and stopped; nothing is pinned, so the
 * servers and the load generator share every core, as a deployment's would. The headline is the median of the
 * per-pair ratios N ÷ 1 of req/s, and of server CPU per create (every thread of the process summed, from /proc);
 * the main thread's share is reported apart (with WORKERS > 1 on SQLite it is the one writer, the serial part).
 * Afterwards every 2xx must be in the store.
 */
import { Sequence } from '../measure.js';
import { mb, median, procStatusKb, ratio3 } from '../metrics.js';
import { workloadTitle } from '../options.js';
import { headerLines, markdownTable, measuredColumns, progressLine, runMeta, writeReport, LOAD_BOUND_PERCENT, type Column, type MeasuredRow } from '../report.js';
import { cliToken } from '../servers.js';
import { withSession, type BenchSetup } from '../session.js';

interface RunRecord extends MeasuredRow {
  readonly pair: number;
  readonly workers: number;
  readonly mainThreadCpuMicrosPerRequest: number;
  readonly hwmMb: number;
  readonly warmupOk: number;
  /** req/s over the same pair's WORKERS=1 run; not for that run itself. */
  ratio?: number;
}

const COLUMNS: ReadonlyArray<Column<RunRecord>> = [
  { header: 'pair', numeric: true, cell: (run) => String(run.pair) },
  { header: 'WORKERS', numeric: true, cell: (run) => String(run.workers) },
  ...measuredColumns<RunRecord>(),
  { header: 'main thread CPU µs/req', numeric: true, cell: (run) => run.mainThreadCpuMicrosPerRequest.toFixed(1) },
  { header: 'ratio', numeric: true, cell: (run) => (run.ratio === undefined ? '' : run.ratio.toFixed(3)) },
];

/** Per pair, `value(N run) ÷ value(1 run)`, then the median. */
function medianPairRatio(runs: readonly RunRecord[], pairs: number, many: number, value: (run: RunRecord) => number): number | null {
  const ratios: number[] = [];
  for (let pair = 1; pair <= pairs; pair += 1) {
    const one = runs.find((run) => run.pair === pair && run.workers === 1);
    const n = runs.find((run) => run.pair === pair && run.workers === many);
    if (one && n && value(one) > 0) ratios.push(value(n) / value(one));
  }
  return ratios.length ? ratio3(median(ratios)) : null;
}

export function runWorkers(setup: BenchSetup): Promise<void> {
  const { options, log } = setup;
  const many = options.workers as number;
  return withSession(setup, async (session) => {
    const { store } = session;
    const plantsBefore = await store.countPlants().catch(() => 0);
    const token = cliToken(store.databaseUrl, session.plantstoreCli);
    const load = {
      token,
      connections: options.connections,
      ids: options.ids,
      offset: options.ids === 'sequential' ? options.prefill : 0,
      sequence: new Sequence(),
    };
    const runs: RunRecord[] = [];
    const exitCodes: Array<number | null> = [];
    for (let pair = 1; pair <= options.pairs; pair += 1) {
      let one: RunRecord | undefined;
      for (const workers of [1, many]) {
        const server = await session.startPlantstore({ WORKERS: String(workers) });
        let warmupOk = 0;
        if (options.warmup > 0) warmupOk = (await session.runLoad({ ...load, server, seconds: options.warmup, rssSampleEveryMs: 0 })).load.ok;
        const m = await session.runLoad({ ...load, server, seconds: options.duration, rssSampleEveryMs: 0 });
        const record: RunRecord = {
          pair,
          workers,
          load: m.load,
          warmupOk,
          rssPeakMb: mb(m.rssPeakKb),
          hwmMb: mb(procStatusKb(server.pid, 'VmHWM') ?? 0),
          serverCpuPercent: m.serverCpuPercent,
          serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
          mainThreadCpuMicrosPerRequest: m.mainThreadCpuMicrosPerRequest,
        };
        if (workers === 1) one = record;
        else if (one) record.ratio = ratio3(m.load.reqPerSec / one.load.reqPerSec);
        runs.push(record);
        log(
          progressLine(`pair ${pair} WORKERS=${String(workers).padEnd(3)}`, record) +
            `  main thread ${record.mainThreadCpuMicrosPerRequest} µs/req` +
            (record.ratio === undefined ? '' : `  ratio ${record.ratio.toFixed(3)}`),
        );
        exitCodes.push(await session.stop(server));
      }
    }
    const plantsAfter = await store.countPlants();
    const ok = runs.reduce((n, run) => n + run.warmupOk + run.load.ok, 0);
    const byWorkers = (workers: number) => runs.filter((run) => run.workers === workers);
    const summary = {
      workers: many,
      reqPerSecRatio: medianPairRatio(runs, options.pairs, many, (run) => run.load.reqPerSec),
      cpuPerCreateRatio: medianPairRatio(runs, options.pairs, many, (run) => run.serverCpuMicrosPerRequest),
      oneMedianReqPerSec: median(byWorkers(1).map((run) => run.load.reqPerSec)),
      manyMedianReqPerSec: median(byWorkers(many).map((run) => run.load.reqPerSec)),
      oneMedianCpuMicros: median(byWorkers(1).map((run) => run.serverCpuMicrosPerRequest)),
      manyMedianCpuMicros: median(byWorkers(many).map((run) => run.serverCpuMicrosPerRequest)),
      manyMedianMainThreadCpuMicros: median(byWorkers(many).map((run) => run.mainThreadCpuMicrosPerRequest)),
      oneMedianP99Ms: median(byWorkers(1).map((run) => run.load.latency.p99)),
      manyMedianP99Ms: median(byWorkers(many).map((run) => run.load.latency.p99)),
      onePeakRssMb: Math.max(...byWorkers(1).map((run) => run.rssPeakMb)),
      manyPeakRssMb: Math.max(...byWorkers(many).map((run) => run.rssPeakMb)),
      non2xx: runs.reduce((n, run) => n + run.load.non2xx, 0),
      errors: runs.reduce((n, run) => n + run.load.errors + run.load.timeouts, 0),
      ok,
      plantsBefore,
      plantsAfter,
      // Requests in flight when a run's clock stops are committed but never counted: at most one per connection per run.
      everyOkStored:
        plantsAfter - plantsBefore >= ok && plantsAfter - plantsBefore <= ok + options.connections * runs.length * (options.warmup > 0 ? 2 : 1),
      exitCodes,
    };
    const meta = runMeta(setup, `WORKERS=1 and WORKERS=${many}, ${workloadTitle(options)}`, store.description);
    const lines = [
      ...headerLines(meta, `${options.pairs} pair(s) × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections; each server started for its run`),
      ...markdownTable(COLUMNS, runs),
      '',
      `**WORKERS=${many} ÷ WORKERS=1, median of per-pair ratios: ${summary.reqPerSecRatio ?? 'n/a'} req/s, ${summary.cpuPerCreateRatio ?? 'n/a'} server CPU per create** · ` +
        `median req/s ${summary.oneMedianReqPerSec} → ${summary.manyMedianReqPerSec}, CPU µs/create ${summary.oneMedianCpuMicros} → ${summary.manyMedianCpuMicros} ` +
        `(main thread ${summary.manyMedianMainThreadCpuMicros}), p99 ${summary.oneMedianP99Ms} → ${summary.manyMedianP99Ms} ms, peak RSS ${summary.onePeakRssMb} → ${summary.manyPeakRssMb} MB`,
      `non-2xx ${summary.non2xx}, errors ${summary.errors}, ${summary.ok} answered 2xx, plants stored ${plantsBefore} → ${plantsAfter} ` +
        `(${summary.everyOkStored ? 'every 2xx is stored; the few extra are requests cut off in flight at the end of a run' : 'MISMATCH with the 2xx count'}), ` +
        `exit codes ${exitCodes.join(' ')}`,
      ...(runs.some((run) => run.load.cpuPercent >= LOAD_BOUND_PERCENT)
        ? [`⚠ load CPU ≥ ${LOAD_BOUND_PERCENT}%: the load generator saturated a core in that run, so its req/s is a floor for the server's capacity, not the capacity.`]
        : []),
      '',
    ];
    const chart = {
      title: `Durable creates, WORKERS=1 and WORKERS=${many}, ${workloadTitle(options)} (${options.store}): req/s per pair`,
      subtitle: `median WORKERS=${many} ÷ WORKERS=1: ${summary.reqPerSecRatio ?? 'n/a'} req/s, ${summary.cpuPerCreateRatio ?? 'n/a'} CPU per create · ${meta.commit}, Node ${meta.machine.node}`,
      unit: 'req/s',
      groups: Array.from({ length: options.pairs }, (_, index) => ({
        label: `pair ${index + 1}`,
        bars: runs.filter((run) => run.pair === index + 1).map((run) => ({ series: `WORKERS=${run.workers}`, value: run.load.reqPerSec })),
      })),
    };
    const label = [options.store, `workers${many}`, options.prefill > 0 ? `prefill${options.prefill}-${options.ids}` : `empty-${options.ids}`, options.quick ? 'quick' : '']
      .filter(Boolean)
      .join('-');
    writeReport(options.out, { result: { meta, summary, runs }, markdown: lines.join('\n'), label, chart });
  });
}
