/**
 * `--scrapers N`: what GET /metrics scraped as fast as N connections can costs creates (issue 30). Each pair runs
 * plantstore three times on the same store, each after its own warm-up: creates alone; creates with N anonymous
 * scrapers (no token: the flood anyone can send); creates with N scrapers holding a metrics:read token (the most a
 * scraper can cost: every scrape a 200 with the whole exposition). The scrapers run in a process of their own on the
 * load core (bench/scraper.ts). The headline is the median per-pair ratio of creates/s with scrapers to without.
 * With --workers N every server runs WORKERS=N.
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

type Variant = 'no scrapers' | 'anonymous scrapers' | 'token scrapers';

interface RunRecord extends MeasuredRow {
  readonly pair: number;
  readonly variant: Variant;
  /** Scrapes answered during the measured run, by status. */
  readonly scrapes: Record<string, number>;
  ratio?: number;
}

const COLUMNS: ReadonlyArray<Column<RunRecord>> = [
  { header: 'pair', numeric: true, cell: (run) => String(run.pair) },
  { header: 'plantstore', numeric: false, cell: (run) => run.variant },
  ...measuredColumns<RunRecord>(),
  { header: 'scrapes', numeric: false, cell: (run) => Object.entries(run.scrapes).map(([status, count]) => `${count}×${status}`).join(' ') || '-' },
  { header: 'ratio', numeric: true, cell: (run) => (run.ratio === undefined ? '' : run.ratio.toFixed(3)) },
];

async function startScrapers(pinPrefix: readonly string[], url: string, connections: number, token: string | null) {
  const script = fileURLToPath(new URL('../scraper.js', import.meta.url));
  const [command, ...args] = [...pinPrefix, process.execPath, script, JSON.stringify({ url, connections, token })];
  const child = spawn(command!, args, { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  await once(createInterface({ input: child.stdout! }), 'line');
  return {
    counts: async () => {
      const answer = once(child, 'message') as Promise<[{ statuses: Record<string, number> }]>;
      child.send('counts');
      return (await answer)[0].statuses;
    },
    close: async () => {
      const exited = once(child, 'exit');
      child.disconnect();
      await exited;
    },
  };
}

export function runScrapers(setup: BenchSetup): Promise<void> {
  const { options, log } = setup;
  const scrapers = options.scrapers as number;
  return withSession(setup, async (session) => {
    const { store } = session;
    const token = cliToken(store.databaseUrl);
    const scrapeToken = runCli(['token', 'create', '--name', 'bench-scraper', '--scope', 'metrics:read'], plantstoreEnv(store.databaseUrl)).stdout.trim();
    const serverEnv = options.workers ? { WORKERS: String(options.workers) } : {};
    const load = { token, connections: options.connections, ids: options.ids, offset: options.ids === 'sequential' ? options.prefill : 0, sequence: new Sequence() };
    const runs: RunRecord[] = [];
    for (let pair = 1; pair <= options.pairs; pair += 1) {
      let baseline: RunRecord | undefined;
      for (const variant of ['no scrapers', 'anonymous scrapers', 'token scrapers'] as const) {
        const server = await session.startPlantstore(serverEnv);
        const flood = variant === 'no scrapers' ? null : await startScrapers(setup.pinning.load, server.url, scrapers, variant === 'token scrapers' ? scrapeToken : null);
        try {
          if (options.warmup > 0) await session.runLoad({ ...load, server, seconds: options.warmup, rssSampleEveryMs: 0 });
          const before = (await flood?.counts()) ?? {};
          const m = await session.runLoad({ ...load, server, seconds: options.duration, rssSampleEveryMs: 0 });
          const after = (await flood?.counts()) ?? {};
          const scrapes = Object.fromEntries(Object.entries(after).map(([status, count]) => [status, count - (before[status] ?? 0)]));
          const record: RunRecord = {
            pair,
            variant,
            scrapes,
            load: m.load,
            rssPeakMb: mb(m.rssPeakKb),
            serverCpuPercent: m.serverCpuPercent,
            serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
          };
          if (variant === 'no scrapers') baseline = record;
          else if (baseline) record.ratio = ratio3(m.load.reqPerSec / baseline.load.reqPerSec);
          runs.push(record);
          log(progressLine(`pair ${pair} ${variant.padEnd(18)}`, record) + (record.ratio === undefined ? '' : `  ratio ${record.ratio.toFixed(3)}`));
        } finally {
          await flood?.close();
          await session.stop(server);
        }
      }
    }
    const ratios = (variant: Variant) => runs.filter((run) => run.variant === variant && run.ratio !== undefined).map((run) => run.ratio as number);
    const summary = {
      scrapers,
      workers: options.workers ?? 1,
      anonymousMedianRatio: ratios('anonymous scrapers').length ? ratio3(median(ratios('anonymous scrapers'))) : null,
      tokenMedianRatio: ratios('token scrapers').length ? ratio3(median(ratios('token scrapers'))) : null,
      noScrapersMedianReqPerSec: median(runs.filter((run) => run.variant === 'no scrapers').map((run) => run.load.reqPerSec)),
    };
    const meta = runMeta(setup, `scrapers, ${workloadTitle(options)}`, store.description);
    const lines = [
      ...headerLines(meta, `${options.pairs} pair(s) × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections creating, ${scrapers} scraping GET /metrics${options.workers ? `, WORKERS=${options.workers}` : ''}`),
      ...markdownTable(COLUMNS, runs),
      '',
      `**Median ratio of creates/s with ${scrapers} scrapers to without: anonymous ${summary.anonymousMedianRatio ?? 'n/a'}, with a metrics:read token ${summary.tokenMedianRatio ?? 'n/a'}** · without scrapers ${summary.noScrapersMedianReqPerSec} req/s`,
      '',
    ];
    writeReport(options.out, {
      result: { meta, summary, runs },
      markdown: lines.join('\n'),
      label: [options.store, 'scrapers', String(scrapers), options.workers ? `workers${options.workers}` : '', options.quick ? 'quick' : ''].filter(Boolean).join('-'),
    });
  });
}
