/**
 * `--webhook`: what a subscription costs creates. Each pair runs plantstore with its one subscription disabled (so no
 * event is written: the no-subscription case), then enabled, each after its own warm-up, on the same store; the
 * headline is the median of the per-pair ratios of req/s (webhook / none). The subscriber is a local receiver on
 * 127.0.0.1 in its own process on the load core (bench/receiver.ts), answering 204 at once
 * (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true lets the dispatcher reach it).
 * Afterwards the outbox is left to drain, and the report says how long that took and whether every event arrived.
 * With --workers N each pair runs both variants with WORKERS=1 and then with WORKERS=N, every process unpinned.
 */
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../test/helpers/process.js';
import { Sequence } from '../measure.js';
import { mb, median, ratio3 } from '../metrics.js';
import { workloadTitle } from '../options.js';
import { headerLines, markdownTable, measuredColumns, progressLine, runMeta, writeReport, type Column, type MeasuredRow } from '../report.js';
import { cliToken, plantstoreEnv } from '../servers.js';
import { withSession, type BenchSetup } from '../session.js';

type Variant = 'no subscription' | 'webhook';

interface RunRecord extends MeasuredRow {
  readonly pair: number;
  /** WORKERS, when --workers asked for a comparison; null otherwise (the default, 1). */
  readonly workers: number | null;
  readonly variant: Variant;
  ratio?: number;
}

const COLUMNS: ReadonlyArray<Column<RunRecord>> = [
  { header: 'pair', numeric: true, cell: (run) => String(run.pair) },
  { header: 'plantstore', numeric: false, cell: (run) => (run.workers === null ? run.variant : `WORKERS=${run.workers} ${run.variant}`) },
  ...measuredColumns<RunRecord>(),
  { header: 'ratio', numeric: true, cell: (run) => (run.ratio === undefined ? '' : run.ratio.toFixed(3)) },
];

/** How long the outbox may take to drain after the last run before the report says it did not. */
const DRAIN_LIMIT_MS = 120_000;

/** The receiver (bench/receiver.ts), started on the load core. */
async function startReceiver(pinPrefix: readonly string[]) {
  const script = fileURLToPath(new URL('../receiver.js', import.meta.url));
  const [command, ...args] = [...pinPrefix, process.execPath, script];
  const child = spawn(command!, args, { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  const { port } = JSON.parse(line) as { port: number };
  return {
    url: `http://127.0.0.1:${port}/bench-hook`,
    counts: async () => {
      const answer = once(child, 'message') as Promise<[{ requests: number; events: number }]>;
      child.send('counts');
      return (await answer)[0];
    },
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.disconnect();
      await exited;
    },
  };
}

export function runWebhook(setup: BenchSetup): Promise<void> {
  const { options, log } = setup;
  return withSession(setup, async (session) => {
    const { store } = session;
    const receiver = await startReceiver(setup.pinning.load);
    try {
      const cliEnv = { ...plantstoreEnv(store.databaseUrl), WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
      const serverEnv = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
      const token = cliToken(store.databaseUrl);
      runCli(['webhook', 'add', '--url', receiver.url, '--name', 'bench'], cliEnv);
      const load = { token, connections: options.connections, ids: options.ids, offset: options.ids === 'sequential' ? options.prefill : 0, sequence: new Sequence() };
      const runs: RunRecord[] = [];
      let webhookOk = 0;
      const workerCounts = options.workers ? [1, options.workers] : [null];
      for (let pair = 1; pair <= options.pairs; pair += 1) for (const workers of workerCounts) {
        let baseline: RunRecord | undefined;
        for (const variant of ['no subscription', 'webhook'] as const) {
          runCli(['webhook', variant === 'webhook' ? 'enable' : 'disable', 'bench'], cliEnv);
          const server = await session.startPlantstore({ ...serverEnv, ...(workers === null ? {} : { WORKERS: String(workers) }) });
          if (options.warmup > 0) {
            const warm = await session.runLoad({ ...load, server, seconds: options.warmup, rssSampleEveryMs: 0 });
            if (variant === 'webhook') webhookOk += warm.load.ok;
          }
          const m = await session.runLoad({ ...load, server, seconds: options.duration, rssSampleEveryMs: 0 });
          if (variant === 'webhook') webhookOk += m.load.ok;
          const record: RunRecord = {
            pair,
            workers,
            variant,
            load: m.load,
            rssPeakMb: mb(m.rssPeakKb),
            serverCpuPercent: m.serverCpuPercent,
            serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
          };
          if (variant === 'no subscription') baseline = record;
          else if (baseline) record.ratio = ratio3(m.load.reqPerSec / baseline.load.reqPerSec);
          runs.push(record);
          const label = `${workers === null ? '' : `WORKERS=${workers} `}${variant}`;
          log(progressLine(`pair ${pair} ${label.padEnd(15)}`, record) + (record.ratio === undefined ? '' : `  ratio ${record.ratio.toFixed(3)}`));
          // The last webhook server stays up to drain the outbox.
          if (!(pair === options.pairs && workers === workerCounts.at(-1) && variant === 'webhook')) await session.stop(server);
          else {
            const started = performance.now();
            let waiting = Number.NaN;
            while (performance.now() - started < DRAIN_LIMIT_MS) {
              waiting = Number(/\twaiting (\d+)\t/.exec(runCli(['webhook', 'list'], cliEnv).stdout)?.[1]);
              if (waiting === 0) break;
              await new Promise((resolve) => setTimeout(resolve, 250));
            }
            const drainMs = Math.round(performance.now() - started);
            await session.stop(server);
            const ratiosOf = (workers: number | null) => runs.filter((run) => run.workers === workers).map((run) => run.ratio).filter((r): r is number => r !== undefined);
            const ratios = ratiosOf(workerCounts.at(-1) ?? null);
            const counts = await receiver.counts();
            // Its CPU is the bench's own: waited for before the report, a recording counts it as such, not as another process's.
            await receiver.close();
            const webhookReqPerSec = (workers: number | null) => median(runs.filter((r) => r.variant === 'webhook' && r.workers === workers).map((r) => r.load.reqPerSec));
            const summary = {
              medianRatio: ratios.length ? ratio3(median(ratios)) : null,
              // --workers: the same ratio with WORKERS=1, and what WORKERS=N makes of creates with the subscription.
              ...(options.workers
                ? {
                    workers: options.workers,
                    oneWorkerMedianRatio: ratiosOf(1).length ? ratio3(median(ratiosOf(1))) : null,
                    webhookManyOverOne: ratio3(webhookReqPerSec(options.workers) / webhookReqPerSec(1)),
                  }
                : {}),
              noSubscriptionMedianReqPerSec: median(runs.filter((r) => r.variant === 'no subscription').map((r) => r.load.reqPerSec)),
              webhookMedianReqPerSec: median(runs.filter((r) => r.variant === 'webhook').map((r) => r.load.reqPerSec)),
              webhookAcknowledged: webhookOk,
              eventsReceived: counts.events,
              requestsReceived: counts.requests,
              waitingAfterDrain: waiting,
              drainMs,
              // Creates cut off in flight at the end of a run are committed (with their events) but never counted.
              everyAcknowledgedEventReceived: waiting === 0 && counts.events >= webhookOk,
            };
            const meta = runMeta(setup, `webhook, ${workloadTitle(options)}`, store.description);
            const lines = [
              ...headerLines(meta, `${options.pairs} pair(s) × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections`),
              ...markdownTable(COLUMNS, runs),
              '',
              options.workers
                ? `**Median ratio webhook/no subscription: WORKERS=1 ${summary.oneWorkerMedianRatio ?? 'n/a'}, WORKERS=${options.workers} ${summary.medianRatio ?? 'n/a'}** · ` +
                  `with the subscription, WORKERS=${options.workers} ÷ WORKERS=1: ${summary.webhookManyOverOne} req/s`
                : `**Median ratio webhook/no subscription: ${summary.medianRatio ?? 'n/a'}** · with one subscription ${summary.webhookMedianReqPerSec} req/s, with none ${summary.noSubscriptionMedianReqPerSec} req/s`,
              `Outbox: ${summary.webhookAcknowledged} creates acknowledged with the subscription active, ${summary.eventsReceived} distinct events received (${summary.requestsReceived} requests), ` +
                `${summary.waitingAfterDrain} waiting ${summary.drainMs} ms after the last run (${summary.everyAcknowledgedEventReceived ? 'every event arrived' : 'NOT every event arrived'})`,
              '',
            ];
            writeReport(options.out, {
              result: { meta, summary, runs },
              markdown: lines.join('\n'),
              label: [options.store, 'webhook', options.workers ? `workers${options.workers}` : '', options.quick ? 'quick' : ''].filter(Boolean).join('-'),
            });
          }
        }
      }
    } finally {
      await receiver.close();
    }
  });
}
