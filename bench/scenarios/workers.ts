/**
 * `--workers N`: what more threads buy on this machine, for each workload (`--workload`, all three by default):
 * durable creates of new ids, GET /plants/{id} of ids spread over the prefilled store, and a mix of 90% of those
 * reads and 10% creates. Each pair runs, for each workload, plantstore with WORKERS=1, then with WORKERS=N, each
 * freshly started on the session's store, warmed up, measured and stopped; nothing is pinned, so the servers and the
 * load generator share every core, as a deployment's would. The headline per workload is the median of the per-pair
 * ratios N ÷ 1 of req/s, and of server CPU per request (every thread of the process summed, from /proc); the main
 * thread's share is reported apart. Afterwards every create answered 2xx must be in the store.
 */
import { Sequence } from '../measure.js';
import { mb, median, procStatusKb, ratio3, round } from '../metrics.js';
import { workloadTitle, type WorkersWorkload } from '../options.js';
import { headerLines, markdownTable, measuredColumns, progressLine, runMeta, writeReport, LOAD_BOUND_PERCENT, type Column, type MeasuredRow } from '../report.js';
import { cliToken } from '../servers.js';
import { withSession, type BenchSetup } from '../session.js';

/** The share of GET /plants/{id} in each workload's requests, the rest being creates. */
const READ_SHARE: Record<WorkersWorkload, number> = { creates: 0, reads: 1, mixed: 0.9 };

interface RunRecord extends MeasuredRow {
  readonly workload: WorkersWorkload;
  readonly pair: number;
  readonly workers: number;
  readonly mainThreadCpuMicrosPerRequest: number;
  /** How busy every core was (server, load generator, kernel), and their busy CPU per answered request. */
  readonly machineBusyShare: number;
  readonly machineCpuMicrosPerRequest: number;
  readonly hwmMb: number;
  readonly warmupOk: number;
  /** req/s over the same pair's WORKERS=1 run; not for that run itself. */
  ratio?: number;
}

const COLUMNS: ReadonlyArray<Column<RunRecord>> = [
  { header: 'workload', numeric: false, cell: (run) => run.workload },
  { header: 'pair', numeric: true, cell: (run) => String(run.pair) },
  { header: 'WORKERS', numeric: true, cell: (run) => String(run.workers) },
  ...measuredColumns<RunRecord>(),
  { header: 'main thread CPU µs/req', numeric: true, cell: (run) => run.mainThreadCpuMicrosPerRequest.toFixed(1) },
  { header: 'machine busy', numeric: true, cell: (run) => run.machineBusyShare.toFixed(2) },
  { header: 'machine CPU µs/req', numeric: true, cell: (run) => String(run.machineCpuMicrosPerRequest) },
  { header: 'ratio', numeric: true, cell: (run) => (run.ratio === undefined ? '' : run.ratio.toFixed(3)) },
];

/**
 * Per pair, the most WORKERS=N could reach over WORKERS=1 on this machine at the costs measured: N's req/s were every
 * core busy at N's machine CPU per request, over 1's req/s as measured. The server and the load generator share the
 * cores, so a ratio above this needs N to cost the machine less per request, not just more threads.
 */
function medianMachineCeiling(runs: readonly RunRecord[], pairs: number, many: number): number | null {
  const ceilings: number[] = [];
  for (let pair = 1; pair <= pairs; pair += 1) {
    const one = runs.find((run) => run.pair === pair && run.workers === 1);
    const n = runs.find((run) => run.pair === pair && run.workers === many);
    if (one && n && one.machineBusyShare > 0 && n.machineCpuMicrosPerRequest > 0) {
      ceilings.push(one.machineCpuMicrosPerRequest / n.machineCpuMicrosPerRequest / one.machineBusyShare);
    }
  }
  return ceilings.length ? ratio3(median(ceilings)) : null;
}

/** Per pair, `value(N run) ÷ value(1 run)`, then the median (`runs`: one workload's). */
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
    const needsIds = options.workloads.some((workload) => READ_SHARE[workload] > 0);
    const paths = needsIds ? (await store.sampleIds(options.quick ? 100 : 2000)).map((id) => `/plants/${id}`) : [];
    if (needsIds && paths.length === 0) throw new Error('--workers with reads needs a prefilled store (--prefill)');
    const runs: RunRecord[] = [];
    const exitCodes: Array<number | null> = [];
    let createsSent = 0;
    for (let pair = 1; pair <= options.pairs; pair += 1) {
      for (const workload of options.workloads) {
        const readShare = READ_SHARE[workload];
        const workloadLoad = readShare > 0 ? { ...load, paths, readShare } : load;
        let one: RunRecord | undefined;
        for (const workers of [1, many]) {
          const server = await session.startPlantstore({ WORKERS: String(workers) });
          const seqBefore = load.sequence.next;
          let warmupOk = 0;
          if (options.warmup > 0) warmupOk = (await session.runLoad({ ...workloadLoad, server, seconds: options.warmup, rssSampleEveryMs: 0 })).load.ok;
          const m = await session.runLoad({ ...workloadLoad, server, seconds: options.duration, rssSampleEveryMs: 0 });
          createsSent += load.sequence.next - seqBefore;
          const record: RunRecord = {
            workload,
            pair,
            workers,
            load: m.load,
            warmupOk,
            rssPeakMb: mb(m.rssPeakKb),
            hwmMb: mb(procStatusKb(server.pid, 'VmHWM') ?? 0),
            serverCpuPercent: m.serverCpuPercent,
            serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
            mainThreadCpuMicrosPerRequest: m.mainThreadCpuMicrosPerRequest,
            machineBusyShare: m.machineBusyShare,
            machineCpuMicrosPerRequest: m.machineCpuMicrosPerRequest,
          };
          if (workers === 1) one = record;
          else if (one) record.ratio = ratio3(m.load.reqPerSec / one.load.reqPerSec);
          runs.push(record);
          log(
            progressLine(`pair ${pair} ${workload.padEnd(7)} WORKERS=${String(workers).padEnd(3)}`, record) +
              `  main thread ${record.mainThreadCpuMicrosPerRequest} µs/req` +
              (record.ratio === undefined ? '' : `  ratio ${record.ratio.toFixed(3)}`),
          );
          exitCodes.push(await session.stop(server));
        }
      }
    }
    const plantsAfter = await store.countPlants();
    const createsOk = runs.filter((run) => run.workload === 'creates').reduce((n, run) => n + run.warmupOk + run.load.ok, 0);
    const ok = runs.reduce((n, run) => n + run.warmupOk + run.load.ok, 0);
    const perWorkload = options.workloads.map((workload) => {
      const of = runs.filter((run) => run.workload === workload);
      const byWorkers = (workers: number) => of.filter((run) => run.workers === workers);
      return {
        workload,
        reqPerSecRatio: medianPairRatio(of, options.pairs, many, (run) => run.load.reqPerSec),
        cpuPerRequestRatio: medianPairRatio(of, options.pairs, many, (run) => run.serverCpuMicrosPerRequest),
        machineCpuPerRequestRatio: medianPairRatio(of, options.pairs, many, (run) => run.machineCpuMicrosPerRequest),
        machineCeilingRatio: medianMachineCeiling(of, options.pairs, many),
        oneMedianMachineBusy: round(median(byWorkers(1).map((run) => run.machineBusyShare)), 2),
        manyMedianMachineBusy: round(median(byWorkers(many).map((run) => run.machineBusyShare)), 2),
        oneMedianReqPerSec: median(byWorkers(1).map((run) => run.load.reqPerSec)),
        manyMedianReqPerSec: median(byWorkers(many).map((run) => run.load.reqPerSec)),
        oneMedianCpuMicros: median(byWorkers(1).map((run) => run.serverCpuMicrosPerRequest)),
        manyMedianCpuMicros: median(byWorkers(many).map((run) => run.serverCpuMicrosPerRequest)),
        manyMedianMainThreadCpuMicros: round(median(byWorkers(many).map((run) => run.mainThreadCpuMicrosPerRequest)), 1),
        oneMedianP99Ms: median(byWorkers(1).map((run) => run.load.latency.p99)),
        manyMedianP99Ms: median(byWorkers(many).map((run) => run.load.latency.p99)),
        onePeakRssMb: Math.max(...byWorkers(1).map((run) => run.rssPeakMb)),
        manyPeakRssMb: Math.max(...byWorkers(many).map((run) => run.rssPeakMb)),
      };
    });
    const summary = {
      workers: many,
      workloads: perWorkload,
      non2xx: runs.reduce((n, run) => n + run.load.non2xx, 0),
      errors: runs.reduce((n, run) => n + run.load.errors + run.load.timeouts, 0),
      ok,
      createsOk,
      createsSent,
      plantsBefore,
      plantsAfter,
      // Every create answered 2xx is stored, and nothing was stored that was not sent. Creates in flight when a run's
      // clock stops are committed but never counted; the mixed workload's 2xx are not split between reads and creates,
      // so its creates are held only to the second bound.
      everyOkStored: plantsAfter - plantsBefore >= createsOk && plantsAfter - plantsBefore <= createsSent,
      exitCodes,
    };
    const meta = runMeta(setup, `WORKERS=1 and WORKERS=${many}, ${workloadTitle(options)}`, store.description);
    const lines = [
      ...headerLines(meta, `${options.pairs} pair(s) × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections; each server started for its run; reads by id over ${paths.length} sampled ids`),
      ...markdownTable(COLUMNS, runs),
      '',
      ...perWorkload.map(
        (w) =>
          `**${w.workload}: WORKERS=${many} ÷ WORKERS=1, median of per-pair ratios: ${w.reqPerSecRatio ?? 'n/a'} req/s, ${w.cpuPerRequestRatio ?? 'n/a'} server CPU per request** · ` +
          `median req/s ${w.oneMedianReqPerSec} → ${w.manyMedianReqPerSec}, CPU µs/req ${w.oneMedianCpuMicros} → ${w.manyMedianCpuMicros} ` +
          `(main thread ${w.manyMedianMainThreadCpuMicros}), p99 ${w.oneMedianP99Ms} → ${w.manyMedianP99Ms} ms, peak RSS ${w.onePeakRssMb} → ${w.manyPeakRssMb} MB; ` +
          `machine busy ${w.oneMedianMachineBusy} → ${w.manyMedianMachineBusy}, machine CPU per request ×${w.machineCpuPerRequestRatio ?? 'n/a'}, ` +
          `so the most WORKERS=${many} could reach with every core busy: ×${w.machineCeilingRatio ?? 'n/a'}`,
      ),
      '',
      `non-2xx ${summary.non2xx}, errors ${summary.errors}, ${summary.ok} answered 2xx (${createsOk} of the creates-only runs), ${createsSent} creates sent, plants stored ${plantsBefore} → ${plantsAfter} ` +
        `(${summary.everyOkStored ? 'every create answered 2xx is stored' : 'MISMATCH with the 2xx count'}), ` +
        `exit codes ${exitCodes.join(' ')}`,
      ...(runs.some((run) => run.load.cpuPercent >= LOAD_BOUND_PERCENT)
        ? [`⚠ load CPU ≥ ${LOAD_BOUND_PERCENT}%: the load generator saturated a core in that run, so its req/s is a floor for the server's capacity, not the capacity.`]
        : []),
      '',
    ];
    const chart = {
      title: `WORKERS=1 and WORKERS=${many}, ${workloadTitle(options)} (${options.store}): req/s per pair and workload`,
      subtitle: `median WORKERS=${many} ÷ WORKERS=1 req/s: ${perWorkload.map((w) => `${w.workload} ${w.reqPerSecRatio ?? 'n/a'}`).join(', ')} · ${meta.commit}, Node ${meta.machine.node}`,
      unit: 'req/s',
      groups: options.workloads.flatMap((workload) =>
        Array.from({ length: options.pairs }, (_, index) => ({
          label: `${workload} ${index + 1}`,
          bars: runs.filter((run) => run.workload === workload && run.pair === index + 1).map((run) => ({ series: `WORKERS=${run.workers}`, value: run.load.reqPerSec })),
        })),
      ),
    };
    const label = [options.store, `workers${many}`, options.prefill > 0 ? `prefill${options.prefill}-${options.ids}` : `empty-${options.ids}`, options.quick ? 'quick' : '']
      .filter(Boolean)
      .join('-');
    writeReport(options.out, { result: { meta, summary, runs }, markdown: lines.join('\n'), label, chart });
  });
}
