/**
 * `--grown N,N,...`: what a grown store costs. In every pair, durable creates with random ids into an empty store and
 * into stores already holding N plants (random ids, inserted in random order: ../prefill.ts), then GET /plants/{id}
 * over GROWN_READS_BASE plants and over the largest store; each run after its own warm-up, each store on its own
 * plantstore, all pinned to the server core. Reads go to stores that take no creates, the large as the small, so the
 * two differ in size alone, not in a WAL left by creates or a checkpoint still copying it on the same core. The headlines are per-pair ratios to the same build's empty store (and
 * to the small store's reads). Afterwards: every 2xx is stored, and each file's size after a checkpoint against what
 * its rows need (the size of a VACUUM INTO copy, every page packed).
 */
import fs from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { LoadResult } from '../load.js';
import { Sequence } from '../measure.js';
import { mb, median, procStatusKb, ratio3 } from '../metrics.js';
import { headerLines, markdownTable, measuredColumns, progressLine, runMeta, writeReport, type Column, type MeasuredRow } from '../report.js';
import { cliToken, startPlantstore, stopServer, type BenchServer } from '../servers.js';
import { withSession, type BenchSession, type BenchSetup } from '../session.js';
import { openStore, type StoreHandle } from '../stores.js';

/** The small store that reads by id over the largest are compared with. */
const GROWN_READS_BASE = 200_000;
const GROWN_READS_BASE_QUICK = 2_000;

/** One store and the plantstore serving it. */
interface Target {
  readonly label: string;
  readonly plants: number;
  readonly store: StoreHandle;
  readonly server: BenchServer;
  readonly token: string;
  readonly file: string;
  /** Ids read by GET /plants/{id}, sampled before any create (reads targets only). */
  readonly paths: readonly string[];
}

interface GrownRun extends MeasuredRow {
  readonly pair: number;
  readonly target: string;
  readonly work: 'creates' | 'reads by id';
  readonly load: LoadResult;
  readonly rssPeakMb: number;
  readonly serverCpuPercent: number;
  readonly serverCpuMicrosPerRequest: number;
}

const COLUMNS: ReadonlyArray<Column<GrownRun>> = [
  { header: 'pair', numeric: true, cell: (run) => String(run.pair) },
  { header: 'store', numeric: false, cell: (run) => run.target },
  { header: 'work', numeric: false, cell: (run) => run.work },
  ...measuredColumns<GrownRun>(),
];

const label = (plants: number) => (plants === 0 ? 'empty' : `${plants.toLocaleString('en-US')} plants`);

/** Per pair, `of(a) / of(b)`; their median. */
function medianPairRatio(runs: readonly GrownRun[], pairs: number, a: string, b: string, work: GrownRun['work'], of: (run: GrownRun) => number): number | null {
  const ratios: number[] = [];
  for (let pair = 1; pair <= pairs; pair += 1) {
    const x = runs.find((run) => run.pair === pair && run.target === a && run.work === work);
    const y = runs.find((run) => run.pair === pair && run.target === b && run.work === work);
    if (x && y && of(y) > 0) ratios.push(of(x) / of(y));
  }
  return ratios.length ? ratio3(median(ratios)) : null;
}

/** A store of `plants` (a copy of the cached prefill) in a folder of its own, with a token and a plantstore on it. */
async function startTarget(session: BenchSession, plants: number, samples: number, started: BenchServer[], work: GrownRun['work'] = 'creates'): Promise<Target> {
  const { setup } = session;
  const dir = path.join(session.dir, `store-${plants}-${work === 'creates' ? 'creates' : 'reads'}`);
  fs.mkdirSync(dir);
  // The prefilled file has the schema of the build measured, so that --plantstore DIR measures an older one too.
  const store = await openStore({ kind: 'sqlite', prefill: plants, ids: 'random', dir, log: setup.log, root: setup.options.plantstoreRoot });
  const paths = samples > 0 ? (await store.sampleIds(samples)).map((id) => `/plants/${id}`) : [];
  const token = cliToken(store.databaseUrl, session.plantstoreCli);
  const server = await startPlantstore({
    pinning: setup.pinning,
    databaseUrl: store.databaseUrl,
    logFile: path.join(dir, 'plantstore.log'),
    cli: session.plantstoreCli,
    cpuProfDir: setup.options.cpuProf ? path.join(setup.options.out, 'profiles') : undefined,
  });
  started.push(server);
  return { label: label(plants), plants, store, server, token, file: store.databaseUrl.slice('sqlite:'.length), paths };
}

/** The file's size once checkpointed (its server stopped) and that of a packed copy of it (VACUUM INTO), in MB. */
function fileSizes(file: string): { fileMb: number; packedMb: number; ratio: number } {
  const packed = `${file}.packed`;
  const db = new DatabaseSync(file);
  try {
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    db.exec(`VACUUM INTO '${packed.replaceAll("'", "''")}'`);
  } finally {
    db.close();
  }
  const size = fs.statSync(file).size;
  const packedSize = fs.statSync(packed).size;
  fs.rmSync(packed);
  return { fileMb: Math.round(size / 1e5) / 10, packedMb: Math.round(packedSize / 1e5) / 10, ratio: ratio3(size / packedSize) };
}

export function runGrown(setup: BenchSetup): Promise<void> {
  const { options, log } = setup;
  return withSession(setup, async (session) => {
    const sizes = [...new Set(options.grown)].sort((a, b) => a - b);
    const largest = sizes.at(-1) as number;
    const readsBase = options.quick ? GROWN_READS_BASE_QUICK : GROWN_READS_BASE;
    const samples = options.quick ? 100 : 2000;
    const started: BenchServer[] = [];
    try {
      const creates: Target[] = [];
      for (const plants of [0, ...sizes]) creates.push(await startTarget(session, plants, 0, started));
      const base = await startTarget(session, readsBase, samples, started, 'reads by id');
      const big = await startTarget(session, largest, samples, started, 'reads by id');
      const reads = [base, big];
      const before = new Map<string, number>();
      for (const target of creates) before.set(target.label, await target.store.countPlants());

      const sequence = new Sequence();
      const runs: GrownRun[] = [];
      const ok = new Map<string, number>();
      const measure = async (pair: number, target: Target, work: GrownRun['work']) => {
        const load = { server: target.server, token: target.token, connections: options.connections, ids: 'random' as const, offset: 0, sequence, rssSampleEveryMs: 0, ...(work === 'reads by id' ? { paths: target.paths } : {}) };
        let warmOk = 0;
        if (options.warmup > 0) warmOk = (await session.runLoad({ ...load, seconds: options.warmup })).load.ok;
        const m = await session.runLoad({ ...load, seconds: options.duration });
        if (work === 'creates') ok.set(target.label, (ok.get(target.label) ?? 0) + warmOk + m.load.ok);
        const run: GrownRun = { pair, target: target.label, work, load: m.load, rssPeakMb: mb(m.rssPeakKb), serverCpuPercent: m.serverCpuPercent, serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest };
        runs.push(run);
        log(progressLine(`pair ${pair} ${work} ${target.label}`.padEnd(40), run));
      };
      for (let pair = 1; pair <= options.pairs; pair += 1) {
        for (const target of creates) await measure(pair, target, 'creates');
        for (const target of reads) await measure(pair, target, 'reads by id');
      }

      const hwm = new Map(creates.map((target) => [target.label, mb(procStatusKb(target.server.pid, 'VmHWM') ?? 0)]));
      const exitCodes: Record<string, number | null> = {};
      for (const target of creates) exitCodes[target.label] = await stopServer(target.server);
      for (const target of reads) exitCodes[`reads over ${target.label}`] = await stopServer(target.server);
      started.length = 0;
      const stores = [];
      for (const target of creates) {
        const after = await target.store.countPlants();
        const added = after - (before.get(target.label) ?? 0);
        const answered = ok.get(target.label) ?? 0;
        // Requests in flight when a run's clock stops are committed but never counted: at most one per connection per run.
        const everyOkStored = added >= answered && added <= answered + options.connections * options.pairs * (options.warmup > 0 ? 2 : 1);
        stores.push({ store: target.label, plantsBefore: before.get(target.label), plantsAfter: after, answered, everyOkStored, vmHwmMb: hwm.get(target.label), ...fileSizes(target.file) });
      }
      const empty = creates[0] as Target;
      const grownSummary = sizes.map((plants) => {
        const name = label(plants);
        return {
          store: name,
          createsOverEmpty: medianPairRatio(runs, options.pairs, name, empty.label, 'creates', (run) => run.load.reqPerSec),
          cpuOverEmpty: medianPairRatio(runs, options.pairs, name, empty.label, 'creates', (run) => run.serverCpuMicrosPerRequest),
          p99OverEmpty: medianPairRatio(runs, options.pairs, name, empty.label, 'creates', (run) => run.load.latency.p99),
        };
      });
      const summary = {
        grown: grownSummary,
        readsOverBase: medianPairRatio(runs, options.pairs, big.label, reads[0]?.label ?? '', 'reads by id', (run) => run.load.reqPerSec),
        readsCpuOverBase: medianPairRatio(runs, options.pairs, big.label, reads[0]?.label ?? '', 'reads by id', (run) => run.serverCpuMicrosPerRequest),
        peakRssMb: Math.max(...runs.map((run) => run.rssPeakMb)),
        stores,
        exitCodes,
      };
      const meta = runMeta(setup, `grown stores: ${sizes.map(label).join(', ')} (random ids)`, 'SQLite files, one per store (WAL; every answer after an fdatasync of the WAL covering it)');
      const lines = [
        ...headerLines(meta, `${options.pairs} pair(s) × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections, one plantstore per store`),
        ...markdownTable(COLUMNS, runs),
        '',
        ...grownSummary.map(
          (row) => `**creates into ${row.store} ÷ into the empty store, per pair: ${row.createsOverEmpty ?? 'n/a'}** · CPU per create ×${row.cpuOverEmpty ?? 'n/a'} · p99 ×${row.p99OverEmpty ?? 'n/a'}`,
        ),
        `**reads by id over ${big.label} ÷ over ${reads[0]?.label}, per pair: ${summary.readsOverBase ?? 'n/a'}** · CPU per read ×${summary.readsCpuOverBase ?? 'n/a'} · peak RSS of any server ${summary.peakRssMb} MB`,
        ...stores.map(
          (row) =>
            `${row.store}: plants ${row.plantsBefore} → ${row.plantsAfter}, ${row.answered} answered 2xx (${row.everyOkStored ? 'every 2xx is stored' : 'MISMATCH with the 2xx count'}); ` +
            `file ${row.fileMb} MB after a checkpoint, packed ${row.packedMb} MB: **×${row.ratio}**; VmHWM ${row.vmHwmMb} MB`,
        ),
        `exit codes ${Object.entries(exitCodes).map(([name, code]) => `${name} ${code}`).join(', ')}`,
        '',
      ];
      writeReport(options.out, { result: { meta, summary, runs }, markdown: lines.join('\n'), label: `sqlite-grown-${sizes.join('-')}${options.quick ? '-quick' : ''}` });
      if (stores.some((row) => !row.everyOkStored) || runs.some((run) => run.load.non2xx > 0 || run.load.errors + run.load.timeouts > 0)) process.exitCode = 1;
    } finally {
      for (const server of started) await stopServer(server).catch(() => undefined);
    }
  });
}
