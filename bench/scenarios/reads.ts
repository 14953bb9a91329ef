/**
 * `--reads`: GET page reads and GET /plants/{id} over a prefilled store, on plantstore alone (no ceiling: the ceiling
 * server only knows POST /plants, and a bare node:http reading nothing would price nothing useful). Every scenario's
 * first answer is checked before its load; each scenario runs after its own warm-up.
 */
import type { LoadResult } from '../load.js';
import { Sequence } from '../measure.js';
import { mb, median } from '../metrics.js';
import { headerLines, markdownTable, measuredColumns, progressLine, runMeta, writeReport, type Column, type MeasuredRow } from '../report.js';
import { cliToken, type BenchServer } from '../servers.js';
import { withSession, type BenchSetup } from '../session.js';
import type { StoreHandle } from '../stores.js';

interface ReadScenario {
  readonly name: string;
  /** GET paths, one chosen at random per request. */
  readonly paths: readonly string[];
  /** What the first answer should hold: a page of this many plants (and a next Link or not), or one plant. */
  readonly expect: { readonly page: number; readonly link: boolean } | 'plant';
}

/** One measured run of one read scenario, as the results file records it. */
interface ReadRun extends MeasuredRow {
  readonly scenario: string;
  readonly example: string;
  readonly repeat: number;
  readonly load: LoadResult;
  readonly rssPeakMb: number;
  readonly serverCpuPercent: number;
  readonly serverCpuMicrosPerRequest: number;
}

const COLUMNS: ReadonlyArray<Column<ReadRun>> = [
  { header: 'scenario', numeric: false, cell: (run) => run.scenario },
  { header: 'example request', numeric: false, cell: (run) => `\`${run.example}\`` },
  ...measuredColumns<ReadRun>(),
];

/** Pages near the start and near the end, with and without a tag, and reads by id spread over the whole store. */
async function readScenarios(store: StoreHandle, quick: boolean): Promise<ReadScenario[]> {
  const nearEnd = (await store.ids('SELECT CAST(id AS TEXT) AS id FROM plants ORDER BY plants.id DESC LIMIT 1 OFFSET 100'))[0];
  const tagNearEnd = (await store.ids("SELECT CAST(id AS TEXT) AS id FROM plants WHERE tag = 'pilea' ORDER BY plants.id DESC LIMIT 1 OFFSET 100"))[0];
  const sample = await store.sampleIds(quick ? 100 : 2000);
  if (nearEnd === undefined || tagNearEnd === undefined || sample.length === 0) throw new Error('--reads needs a prefill of more than 100 plants per tag');
  return [
    { name: 'first page', paths: ['/plants?limit=20'], expect: { page: 20, link: true } },
    { name: 'deep page (101 rows from the end)', paths: [`/plants?limit=20&after=${nearEnd}`], expect: { page: 20, link: true } },
    { name: 'tag first page (tag=pilea, 1/4 of rows)', paths: ['/plants?limit=20&tag=pilea'], expect: { page: 20, link: true } },
    { name: 'tag deep page', paths: [`/plants?limit=20&tag=pilea&after=${tagNearEnd}`], expect: { page: 20, link: true } },
    { name: `GET /plants/{id}, ${sample.length} random existing ids`, paths: sample.map((id) => `/plants/${id}`), expect: 'plant' },
  ];
}

/** Each scenario's first path answered as expected, said in one phrase per scenario; throws otherwise. */
async function checkAnswers(plantstore: BenchServer, token: string, scenarios: readonly ReadScenario[]): Promise<string[]> {
  const checks: string[] = [];
  for (const scenario of scenarios) {
    const response = await fetch(`${plantstore.url}${scenario.paths[0]}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await response.json()) as unknown;
    const link = response.headers.get('link');
    const good =
      response.status === 200 &&
      (scenario.expect === 'plant'
        ? typeof body === 'object' && body !== null && 'id' in body
        : Array.isArray(body) && body.length === scenario.expect.page && (link !== null) === scenario.expect.link);
    if (!good) throw new Error(`${scenario.name}: unexpected answer ${response.status} ${JSON.stringify(body).slice(0, 200)} link ${link}`);
    checks.push(`${scenario.name}: ${scenario.expect === 'plant' ? 'a plant' : `${scenario.expect.page} plants${link ? ' + Link next' : ''}`}`);
  }
  return checks;
}

/** The median req/s of one read scenario's runs, rounded. */
function medianReqPerSec(runs: readonly ReadRun[], name: string): number {
  return Math.round(median(runs.filter((run) => run.scenario === name).map((run) => run.load.reqPerSec)));
}

export function runReads(setup: BenchSetup): Promise<void> {
  const { options, log } = setup;
  return withSession(setup, async (session) => {
    const { store } = session;
    const plantsBefore = await store.countPlants();
    const scenarios = await readScenarios(store, options.quick);
    const token = cliToken(store.databaseUrl);
    const plantstore = await session.startPlantstore();
    const checks = await checkAnswers(plantstore, token, scenarios);
    log(`reads: answers checked: ${checks.join('; ')}`);

    const runs: ReadRun[] = [];
    // Reads send no ids; the sequence only satisfies the load's interface.
    const load = { server: plantstore, token, connections: options.connections, ids: options.ids, offset: 0, sequence: new Sequence(), rssSampleEveryMs: 0 };
    for (let repeat = 1; repeat <= options.pairs; repeat += 1) {
      for (const scenario of scenarios) {
        if (options.warmup > 0) await session.runLoad({ ...load, seconds: options.warmup, paths: scenario.paths });
        const m = await session.runLoad({ ...load, seconds: options.duration, paths: scenario.paths });
        const run: ReadRun = {
          scenario: scenario.name,
          example: scenario.paths[0] as string,
          repeat,
          load: m.load,
          rssPeakMb: mb(m.rssPeakKb),
          serverCpuPercent: m.serverCpuPercent,
          serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
        };
        runs.push(run);
        log(progressLine(scenario.name.padEnd(42), run));
      }
    }
    const exitCode = await session.stop(plantstore);
    const plantsAfter = await store.countPlants();
    const meta = runMeta(setup, `reads over ${plantsBefore} plants (${options.ids} ids)`, store.description);
    const summary = { plantsBefore, plantsAfter, unchanged: plantsBefore === plantsAfter, checks, exitCode };
    const lines = [
      ...headerLines(
        meta,
        `${options.pairs} run(s) per scenario × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections. No ceiling: reads are measured on plantstore alone.`,
      ),
      ...markdownTable(COLUMNS, runs),
      '',
      `**over ${plantsBefore.toLocaleString('en-US')} plants, median req/s: ${scenarios.map((scenario) => `${scenario.name} ${medianReqPerSec(runs, scenario.name)}`).join(', ')}**`,
      '',
      `Answers checked before the load: ${checks.join('; ')}. Plants ${plantsBefore} → ${plantsAfter}${summary.unchanged ? ' (unchanged)' : ' (CHANGED during a read-only run)'}, exit code ${exitCode}.`,
      '',
    ];
    const label = `${options.store}-reads${options.prefill}-${options.ids}${options.quick ? '-quick' : ''}`;
    writeReport(options.out, { result: { meta, summary, runs }, markdown: lines.join('\n'), label });
    const bad = runs.some((run) => run.load.non2xx > 0 || run.load.errors + run.load.timeouts > 0);
    if (bad || !summary.unchanged) process.exitCode = 1;
  });
}
