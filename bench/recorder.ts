/**
 * `--record`: measures how quiet the machine was around a bench program's run and, if quiet enough (QUIET in
 * ./record.ts), rewrites that scenario's section of BENCHMARKS.md from the run; otherwise says why and exits 3,
 * leaving the page as it was. One recording per process: the program starts it before its first server and hands
 * its results to `finishRecording` (report.ts's writeReport does that for `npm run bench`'s scenarios).
 *
 * Other processes' share of the CPU is the machine's busy time (/proc/stat, steal included) less this process's and
 * its descendants' (/proc/PID/stat of each one alive: utime, stime, cutime, cstime), over all the machine's time. A
 * descendant that ends without being waited for by this process or another descendant is counted as another
 * process's: the error can only refuse a run.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT } from './layout.js';
import { formatSection, hashText, judgeQuiet, MEASURED_PATHS, QUIET, renderBody, replaceSection, type QuietSample } from './record.js';
import { scenario, SCENARIOS, type Scenario } from './record-scenarios.js';

/** How long a recording waits for a quiet window of QUIET.BEFORE_SECONDS before it starts anyway (and is refused). */
const QUIET_WAIT_SECONDS = 300;
/** Exit code of a run the recorder refused. */
const NOT_QUIET_EXIT = 3;

export class RecordRefused extends Error {
  override readonly name = 'RecordRefused';
}

export function git(args: readonly string[], cwd = ROOT): { ok: boolean; out: string } {
  const result = spawnSync('git', args, { cwd, encoding: 'utf8' });
  return { ok: result.status === 0, out: (result.stdout ?? '').trim() };
}

/** A hash of the git trees of MEASURED_PATHS at `commit`: what a section's `tree=` says was measured. */
export function measuredTree(commit: string, cwd = ROOT): string | undefined {
  const listing = git(['ls-tree', commit, '--', ...MEASURED_PATHS], cwd);
  return listing.ok && listing.out !== '' ? hashText(listing.out) : undefined;
}

interface Ticks {
  readonly busy: number;
  readonly steal: number;
  readonly all: number;
  readonly own: number;
}

/** A process's CPU ticks with those of the children it reaped, and its parent, from /proc/PID/stat; undefined once gone. */
function processTicks(pid: string): { readonly ppid: number; readonly ticks: number } | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // After the pid and name: ppid is field 4 of proc(5), 1 here; utime, stime, cutime, cstime fields 14-17, 12-15 here.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  return { ppid: fields[1] ?? 0, ticks: (fields[11] ?? 0) + (fields[12] ?? 0) + (fields[13] ?? 0) + (fields[14] ?? 0) };
}

/**
 * The CPU ticks of this process and of every descendant alive now, each with the children it reaped: a server the
 * bench starts, and the processes that server starts in turn (PostgreSQL's backends), are the bench's own.
 */
function ownTicks(): number {
  const children = new Map<number, number[]>();
  const ticksOf = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const found = processTicks(entry);
    if (!found) continue;
    ticksOf.set(Number(entry), found.ticks);
    children.set(found.ppid, [...(children.get(found.ppid) ?? []), Number(entry)]);
  }
  let total = 0;
  for (const waiting = [process.pid]; waiting.length > 0; ) {
    const pid = waiting.pop() as number;
    total += ticksOf.get(pid) ?? 0;
    waiting.push(...(children.get(pid) ?? []));
  }
  return total;
}

function ticks(): Ticks {
  // user nice system idle iowait irq softirq steal: guest and guest_nice are counted in user and nice already.
  const machine = (fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1, 9).map(Number);
  const all = machine.reduce((sum, value) => sum + value, 0);
  return { busy: all - (machine[3] ?? 0) - (machine[4] ?? 0), steal: machine[7] ?? 0, all, own: ownTicks() };
}

/** The machine's busy share of all its CPU time (steal included) over the next `seconds`, this process's own less. */
async function busyShareOver(seconds: number): Promise<number> {
  const start = ticks();
  await sleep(seconds * 1000);
  const end = ticks();
  return Math.max(0, end.busy - start.busy - (end.own - start.own)) / Math.max(1, end.all - start.all);
}

const loadNow = () => os.loadavg().map((value) => Math.round(value * 100) / 100);

/** What the record wants from a run. */
export interface RunFigures {
  /** One line of Markdown, without emphasis: the figure a reader quotes. */
  readonly headline: string;
  readonly details: readonly string[];
  /** The pairs' headline ratios, for the spread; empty for a scenario without pairs. */
  readonly ratios: readonly number[];
}

interface Recording {
  readonly scenario: Scenario;
  readonly commit: string;
  readonly loadBefore: readonly number[];
  readonly busyBefore: number;
  readonly start: Ticks;
  readonly log: (line: string) => void;
  /** The program's arguments, `--record` included. */
  readonly args: readonly string[];
}

let active: Recording | undefined;

/**
 * Starts the recording of `name`: refuses at once when the measured paths have uncommitted changes (the section
 * names the commit measured), then waits for a quiet window.
 */
export async function startRecording(name: string, log: (line: string) => void, args = process.argv.slice(2)): Promise<void> {
  const found = scenario(name);
  if (!found) throw new RecordRefused(`no scenario ${name} in bench/record-scenarios.ts`);
  const dirty = git(['status', '--porcelain', '--', ...MEASURED_PATHS]);
  if (!dirty.ok) throw new RecordRefused('git is needed to record: the section names the commit measured');
  if (dirty.out !== '') throw new RecordRefused(`uncommitted changes under ${MEASURED_PATHS.join(', ')}: commit them, then record`);
  const commit = git(['rev-parse', '--short=12', 'HEAD']).out;
  let busyBefore = await busyShareOver(QUIET.BEFORE_SECONDS);
  for (let waited = QUIET.BEFORE_SECONDS; busyBefore > QUIET.OTHERS_SHARE && waited < QUIET_WAIT_SECONDS; waited += QUIET.BEFORE_SECONDS) {
    log(`record: the machine was ${(busyBefore * 100).toFixed(1)}% busy; waiting up to ${QUIET_WAIT_SECONDS} s for ${QUIET.BEFORE_SECONDS} quiet seconds`);
    busyBefore = await busyShareOver(QUIET.BEFORE_SECONDS);
  }
  active = { scenario: found, commit, loadBefore: loadNow(), busyBefore, start: ticks(), log, args };
}

/**
 * For a program outside `npm run bench`: when its arguments hold `--record`, takes it out of process.argv (so the
 * program reads the rest as before) and starts the recording of `name`. A refusal ends the process with code 2.
 */
export async function recordIfAsked(name: string, log = (line: string) => process.stderr.write(`${line}\n`)): Promise<void> {
  const args = process.argv.slice(2);
  const index = process.argv.indexOf('--record');
  if (index === -1) return;
  process.argv.splice(index, 1);
  try {
    await startRecording(name, log, args);
  } catch (error) {
    if (!(error instanceof RecordRefused)) throw error;
    log(`--record: ${error.message}`);
    process.exit(2);
  }
}

export function recording(): boolean {
  return active !== undefined;
}

/** The sample of the recording so far. */
function sampleSince(start: Ticks, loadBefore: readonly number[], busyBefore: number): QuietSample {
  const end = ticks();
  const all = Math.max(1, end.all - start.all);
  return {
    loadBefore,
    busyBefore,
    loadAfter: loadNow(),
    othersShare: Math.max(0, end.busy - start.busy - (end.own - start.own)) / all,
    stealShare: (end.steal - start.steal) / all,
  };
}

/** Ends the recording: writes the section when the run was quiet, else logs why and sets exit code 3. No-op when none. */
export function finishRecording(figures: RunFigures, benchmarksFile = path.join(ROOT, 'BENCHMARKS.md')): void {
  const run = active;
  if (!run) return;
  active = undefined;
  const sample = sampleSince(run.start, run.loadBefore, run.busyBefore);
  const verdict = judgeQuiet(sample, figures.ratios);
  if (!verdict.quiet) {
    run.log(`record: NOT recorded, the machine was not quiet: ${verdict.reasons.join('; ')}`);
    process.exitCode = NOT_QUIET_EXIT;
    return;
  }
  const tree = measuredTree(run.commit);
  if (!tree) throw new RecordRefused(`cannot read the trees of ${MEASURED_PATHS.join(', ')} at ${run.commit}`);
  const cpus = os.cpus();
  const body = renderBody({
    title: run.scenario.title,
    measures: run.scenario.measures,
    command: commandOf(run.scenario, run.args),
    machine: { cpu: cpus[0]?.model.trim() ?? 'unknown', cores: cpus.length, node: process.version, kernel: os.release() },
    sample,
    spread: verdict.spread,
    commit: run.commit,
    headline: figures.headline,
    details: figures.details,
  });
  const section = formatSection(run.scenario.name, { epoch: run.scenario.epoch, pending: false, commit: run.commit, tree }, body);
  const later = SCENARIOS.slice(SCENARIOS.indexOf(run.scenario) + 1).map((other) => other.name);
  fs.writeFileSync(benchmarksFile, replaceSection(fs.readFileSync(benchmarksFile, 'utf8'), run.scenario.name, section, later));
  run.log(`record: wrote the ${run.scenario.name} section of ${path.relative(ROOT, benchmarksFile)}`);
}

/** The command as run, `--record` included: what a reader types to record the section again. */
function commandOf(found: Scenario, argv: readonly string[]): string {
  const args = argv.join(' ');
  const program = path.relative(ROOT, process.argv[1] ?? '');
  if (program === 'dist/bench/bench.js') return `npm run bench -- ${args}`;
  if (program === 'dist/bench/commit-ceiling.js') return `npm run bench:commits -- ${args}`;
  return program === '' ? found.command : `node ${program} ${args}`.trim();
}

/**
 * The headline runs of a scenario's result rows: those with a numeric `ratio`, and among them plantstore's (creates)
 * or the first run's workload or variant, so the spread compares like with like.
 */
export function pairRatios(runs: readonly object[]): number[] {
  type Row = Record<string, unknown>;
  let rows = (runs as Row[]).filter((row) => typeof row.ratio === 'number');
  const first = rows[0];
  if (first && 'server' in first) rows = rows.filter((row) => row.server === 'plantstore');
  for (const key of ['workload', 'variant']) if (first && key in first) rows = rows.filter((row) => row[key] === first[key]);
  return rows.map((row) => row.ratio as number);
}

/** A scenario's printed Markdown as a section's figures: its bold line is the headline, its header lines go. */
export function figuresFromMarkdown(markdown: string, ratios: readonly number[]): RunFigures {
  const lines = markdown.split('\n');
  const bold = lines.find((line) => line.startsWith('**')) ?? '';
  const headline = /^\*\*(.+?)\*\*/.exec(bold)?.[1] ?? 'see the table';
  const rest = bold.replace(/^\*\*.+?\*\*\s*(·\s*)?/, '');
  const details = lines.filter((line) => !/^(### |Command: |Machine: )/.test(line)).map((line) => (line === bold ? rest : line));
  while (details[0] === '') details.shift();
  while (details.at(-1) === '') details.pop();
  return { headline, details, ratios };
}
