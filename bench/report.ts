/**
 * The report: what every result records about its run (meta), the markdown both scenarios print (a header naming
 * the conditions, then tables of runs), and the files written for each result into --out, one per writer below.
 */
import fs from 'node:fs';
import path from 'node:path';
import { renderBarChart, type ChartData } from './chart.js';
import { machine, sourceRevision, type Machine, type Pinning } from './environment.js';
import type { LoadGenerator } from './generator.js';
import type { LoadResult } from './load.js';
import { commandLine, type BenchOptions } from './options.js';
import { figuresFromMarkdown, finishRecording, pairRatios } from './recorder.js';

/** A load process this busy is itself the bottleneck: its run measures the generator more than the server. */
export const LOAD_BOUND_PERCENT = 90;

export interface RunMeta {
  readonly date: string;
  readonly command: string;
  readonly scenario: string;
  readonly store: BenchOptions['store'];
  readonly storeDescription: string;
  /** Every option but --out. */
  readonly options: Omit<BenchOptions, 'out'> & { readonly out: undefined };
  readonly generator: string;
  readonly generatorNote: string;
  readonly pinning: string;
  readonly machine: Machine;
  readonly commit: string;
  readonly workingTreeDirty: boolean;
}

export interface RunConditions {
  readonly options: BenchOptions;
  readonly pinning: Pinning;
  readonly generator: LoadGenerator;
}

/** Taken once the runs are done: the date and the machine's load average are the end's. */
export function runMeta(conditions: RunConditions, scenario: string, storeDescription: string): RunMeta {
  const { options, pinning, generator } = conditions;
  return {
    date: new Date().toISOString(),
    command: commandLine(),
    scenario,
    store: options.store,
    storeDescription,
    options: { ...options, out: undefined },
    generator: generator.description,
    generatorNote: generator.note,
    pinning: pinning.note,
    machine: machine(),
    ...sourceRevision(),
  };
}

/** Title, command, and the conditions (generator, pinning, store, machine, commit), then a blank line. */
export function headerLines(meta: RunMeta, runsDescription: string): string[] {
  const m = meta.machine;
  return [
    `### ${meta.scenario} (${meta.store}) — ${meta.date}`,
    '',
    `Command: \`${meta.command}\` · ${runsDescription}`,
    `Load generator: ${meta.generator} — ${meta.generatorNote}. Pinning: ${meta.pinning}. Store: ${meta.storeDescription}.`,
    `Machine: ${m.nproc} CPUs, ${m.cpu}, ${m.memoryGb} GB, Linux ${m.kernel}, Node ${m.node}; load average at end ${m.loadAverageAtEnd.join(' ')}. Commit ${meta.commit}${meta.workingTreeDirty ? ' (src/ has uncommitted changes)' : ''}.`,
    '',
  ];
}

export interface Column<Row> {
  readonly header: string;
  readonly numeric: boolean;
  readonly cell: (row: Row) => string;
}

/** A markdown table, one line per row; numeric columns are right-aligned. */
export function markdownTable<Row>(columns: ReadonlyArray<Column<Row>>, rows: readonly Row[]): string[] {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [
    line(columns.map((column) => column.header)),
    line(columns.map((column) => (column.numeric ? '---:' : '---'))),
    ...rows.map((row) => line(columns.map((column) => column.cell(row)))),
  ];
}

/** The columns every table has, from req/s to load CPU %, for rows that carry one measured run. */
export interface MeasuredRow {
  readonly load: LoadResult;
  readonly rssPeakMb: number;
  readonly serverCpuPercent: number;
  readonly serverCpuMicrosPerRequest: number;
}

export function measuredColumns<Row extends MeasuredRow>(): Array<Column<Row>> {
  return [
    { header: 'req/s', numeric: true, cell: (run) => String(run.load.reqPerSec) },
    { header: 'p50 ms', numeric: true, cell: (run) => run.load.latency.p50.toFixed(2) },
    { header: 'p99 ms', numeric: true, cell: (run) => run.load.latency.p99.toFixed(2) },
    { header: 'max ms', numeric: true, cell: (run) => run.load.latency.max.toFixed(1) },
    { header: '2xx', numeric: true, cell: (run) => String(run.load.ok) },
    { header: 'non-2xx', numeric: true, cell: (run) => String(run.load.non2xx) },
    { header: 'errors', numeric: true, cell: (run) => String(run.load.errors + run.load.timeouts) },
    { header: 'peak RSS MB', numeric: true, cell: (run) => String(run.rssPeakMb) },
    { header: 'server CPU %', numeric: true, cell: (run) => String(run.serverCpuPercent) },
    { header: 'server CPU µs/req', numeric: true, cell: (run) => String(run.serverCpuMicrosPerRequest) },
    {
      header: 'load CPU %',
      numeric: true,
      cell: (run) => `${run.load.cpuPercent}${run.load.cpuPercent >= LOAD_BOUND_PERCENT ? ' ⚠' : ''}`,
    },
  ];
}

/** The progress line printed on stderr after each measured run. */
export function progressLine(label: string, measured: MeasuredRow): string {
  const l = measured.load;
  return (
    `  ${label} ${String(l.reqPerSec).padStart(6)} req/s  p50 ${l.latency.p50.toFixed(2)} ms  p99 ${l.latency.p99.toFixed(2)} ms  ` +
    `non-2xx ${l.non2xx}  errors ${l.errors + l.timeouts}  RSS ${measured.rssPeakMb} MB  server CPU ${measured.serverCpuPercent}% (${measured.serverCpuMicrosPerRequest} µs/req)  load CPU ${l.cpuPercent}%`
  );
}

/** One result: the JSON file's content, whole. */
interface BenchResult {
  readonly meta: RunMeta;
  readonly summary: object;
  readonly runs: readonly object[];
}

export interface Report {
  readonly result: BenchResult;
  /** What is printed, and written as .md. */
  readonly markdown: string;
  /** Distinguishes the result files of one date: store, scenario, options. */
  readonly label: string;
  /** A picture of the runs, written as .svg when the scenario draws one. */
  readonly chart?: ChartData;
}

/** A file written for every result, next to the others: `<date>-<label>.<extension>`. */
interface ResultWriter {
  readonly extension: string;
  /** The file's content, or undefined when this result has nothing for this writer. */
  render(report: Report): string | undefined;
}

const RESULT_WRITERS: readonly ResultWriter[] = [
  { extension: 'json', render: (report) => `${JSON.stringify(report.result, null, 2)}\n` },
  { extension: 'md', render: (report) => report.markdown },
  { extension: 'svg', render: (report) => (report.chart ? renderBarChart(report.chart) : undefined) },
];

/** Writes every result file into `outDir`, records the run under --record, then prints the markdown and where the JSON went. */
export function writeReport(outDir: string, report: Report): void {
  fs.mkdirSync(outDir, { recursive: true });
  const base = path.join(outDir, `${report.result.meta.date.replace(/[:.]/g, '-')}-${report.label}`);
  const written: string[] = [];
  for (const writer of RESULT_WRITERS) {
    const content = writer.render(report);
    if (content === undefined) continue;
    fs.writeFileSync(`${base}.${writer.extension}`, content);
    written.push(writer.extension);
  }
  finishRecording(figuresFromMarkdown(report.markdown, pairRatios(report.result.runs)));
  process.stdout.write(`${report.markdown}\nresults: ${base}.json\n${written.includes('svg') ? `chart: ${base}.svg\n` : ''}`);
}
