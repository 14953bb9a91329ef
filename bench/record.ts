/**
 * BENCHMARKS.md as the bench writes it: one section per scenario between markers, each stamped with what it measured.
 *
 *   <!-- record:NAME epoch=E commit=C tree=T body=B -->
 *   ...the section, its heading first...
 *   <!-- /record:NAME -->
 *
 * E is the scenario's epoch (bench/record-scenarios.ts) when the section was written; C the commit measured; T a hash
 * of the measured paths' git trees at C (MEASURED_PATHS), so a stamp cannot name a commit other than the one measured;
 * B a hash of the body, so an edit by hand shows. A section written before any quiet run carries `pending` instead of
 * a run's stamp and says so in its body (PENDING_NOTICE). Pure functions: bench/recorder.ts does the sampling and the
 * file, test/unit/bench-record.test.ts checks both these and the BENCHMARKS.md in the tree.
 */
import { createHash } from 'node:crypto';

/** What a figure depends on: a change here may move it. */
export const MEASURED_PATHS = ['src', 'bench', 'package-lock.json'] as const;

/**
 * A quiet machine, where a figure can be trusted to a few percent: the bench alone on it.
 *   - in the BEFORE_SECONDS before the run, the machine's busy time at most OTHERS_SHARE of its CPU time (the
 *     recorder waits for such a window, up to a limit): measured, where the load average only trails what ran;
 *   - the CPU time other processes used during the run, and the time the hypervisor stole, each at most
 *     OTHERS_SHARE of all the machine's CPU time over the run (/proc/stat, less this process and its children);
 *   - the pairs' headline ratios within PAIR_SPREAD of their median ((max - min) / median), for scenarios in pairs.
 */
export const QUIET = { BEFORE_SECONDS: 15, OTHERS_SHARE: 0.05, PAIR_SPREAD: 0.15 } as const;

/** The first line of a pending section's body after its heading. */
export const PENDING_NOTICE = 'Not yet written by `--record`: below is the last figure recorded by hand, and the commit that recorded it.';

export interface Stamp {
  readonly epoch: number;
  readonly pending: boolean;
  readonly commit: string;
  readonly tree: string;
  readonly body: string;
}

export interface Section {
  readonly name: string;
  readonly stamp: Stamp;
  /** The text between the markers, without their lines. */
  readonly text: string;
}

/** What the machine did during a run: the inputs of `judgeQuiet`. */
export interface QuietSample {
  readonly loadBefore: readonly number[];
  /** The machine's busy share of its CPU time in the window before the run, 0–1. */
  readonly busyBefore: number;
  readonly loadAfter: readonly number[];
  /** Other processes' CPU time over all the machine's CPU time during the run, 0–1. */
  readonly othersShare: number;
  /** Time stolen by the hypervisor over all the machine's CPU time, 0–1. */
  readonly stealShare: number;
}

export interface Verdict {
  readonly quiet: boolean;
  /** Why not, one line each; empty when quiet. */
  readonly reasons: readonly string[];
  readonly spread: number | null;
}

/** (max - min) / median of the pairs' ratios; null with fewer than two. */
export function pairSpread(ratios: readonly number[]): number | null {
  if (ratios.length < 2) return null;
  const sorted = [...ratios].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  const median = sorted.length % 2 ? (sorted[Math.floor(middle)] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  return median > 0 ? ((sorted.at(-1) as number) - (sorted[0] as number)) / median : null;
}

const percent = (share: number) => `${(share * 100).toFixed(1)}%`;

export function judgeQuiet(sample: QuietSample, ratios: readonly number[]): Verdict {
  const reasons: string[] = [];
  if (!(sample.busyBefore <= QUIET.OTHERS_SHARE))
    reasons.push(`the machine was ${percent(sample.busyBefore)} busy in the ${QUIET.BEFORE_SECONDS} s before the run, above ${percent(QUIET.OTHERS_SHARE)}`);
  if (!(sample.othersShare <= QUIET.OTHERS_SHARE)) reasons.push(`other processes used ${percent(sample.othersShare)} of the machine's CPU, above ${percent(QUIET.OTHERS_SHARE)}`);
  if (!(sample.stealShare <= QUIET.OTHERS_SHARE)) reasons.push(`the hypervisor stole ${percent(sample.stealShare)} of the machine's CPU, above ${percent(QUIET.OTHERS_SHARE)}`);
  const spread = pairSpread(ratios);
  if (spread !== null && !(spread <= QUIET.PAIR_SPREAD)) reasons.push(`the pairs' ratios spread ${percent(spread)} of their median, above ${percent(QUIET.PAIR_SPREAD)}`);
  return { quiet: reasons.length === 0, reasons, spread };
}

/** A run as the section shows it. */
export interface RecordedRun {
  readonly title: string;
  readonly measures: string;
  readonly command: string;
  readonly machine: { readonly cpu: string; readonly cores: number; readonly node: string; readonly kernel: string };
  readonly sample: QuietSample;
  readonly spread: number | null;
  readonly commit: string;
  /** The figure a reader quotes, in one line of Markdown. */
  readonly headline: string;
  /** The run's tables and notes, Markdown lines. */
  readonly details: readonly string[];
}

export function hashText(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** A line Markdown needs on its own: a table row or a list item. */
const OWN_LINE = /^(\||[-*] )/;

/**
 * A section's body from a run: heading, then one paragraph of the headline, what it measures, the command, the
 * machine and the run's first paragraph of notes (how it loaded the server), then the rest of the run's details as
 * `compactDetails` packs them, so the page holds every scenario in its line budget.
 */
export function renderBody(run: RecordedRun): string {
  const m = run.machine;
  const s = run.sample;
  const context =
    `${run.measures} Command: \`${run.command}\` at commit ${run.commit}. ` +
    `Machine: ${m.cpu}, ${m.cores} cores, Node ${m.node}, Linux ${m.kernel}; ${percent(s.busyBefore)} busy in the ${QUIET.BEFORE_SECONDS} s before; load average ${s.loadBefore.join(' ')} before, ` +
    `${s.loadAfter.join(' ')} after; other processes ${percent(s.othersShare)} and steal ${percent(s.stealShare)} of the CPU` +
    `${run.spread === null ? '' : `; pairs' spread ${percent(run.spread)}`}.`;
  const details = compactDetails(run.details);
  const leadsWithParagraph = details[0] !== undefined && !OWN_LINE.test(details[0]);
  const opening = `**${run.headline}** · ${context}${leadsWithParagraph ? ` ${details[0]}` : ''}`;
  const rest = leadsWithParagraph ? details.slice(2) : details;
  return [`## ${run.title}`, '', opening, ...(rest.length > 0 ? ['', ...rest] : [])].join('\n');
}

/**
 * Details in as few lines as render the same: the lines of a paragraph joined into one, with a ` · ` where a line
 * ends without a stop (Markdown joins them anyway); tables a row a line, lists an item a line; one blank line
 * between blocks.
 */
export function compactDetails(details: readonly string[]): string[] {
  const blocks: string[][] = [];
  let block: string[] = [];
  let inOwnLines = false;
  for (const line of details) {
    // A list item, like a table row, keeps a line of its own.
    const ownLine = OWN_LINE.test(line);
    if (line.trim() === '' || ownLine !== inOwnLines) {
      if (block.length > 0) blocks.push(block);
      block = [];
      inOwnLines = ownLine;
    }
    if (line.trim() !== '') block.push(line.trim());
  }
  if (block.length > 0) blocks.push(block);
  return blocks.flatMap((lines, index) => {
    const packed = lines[0] !== undefined && OWN_LINE.test(lines[0]) ? lines : [lines.reduce((joined, line) => `${joined}${/[.:]$/.test(joined) ? ' ' : ' · '}${line}`)];
    return index === 0 ? packed : ['', ...packed];
  });
}

/** A pending section's body: the heading, what it measures, how to record it, and the last quiet figure. */
export function renderPendingBody(title: string, measures: string, command: string, lastFigure: readonly string[]): string {
  return [`## ${title}`, '', PENDING_NOTICE, '', measures, '', `Command: \`${command}\`.`, '', ...lastFigure].join('\n');
}

function formatStamp(stamp: Stamp): string {
  return `epoch=${stamp.epoch}${stamp.pending ? ' pending' : ''} commit=${stamp.commit} tree=${stamp.tree} body=${stamp.body}`;
}

/** The section's text, markers included, with the body's hash computed. */
export function formatSection(name: string, stamp: Omit<Stamp, 'body'>, body: string): string {
  return `<!-- record:${name} ${formatStamp({ ...stamp, body: hashText(body) })} -->\n${body}\n<!-- /record:${name} -->`;
}

const OPENING = /^<!-- record:([a-z0-9-]+) epoch=(\d+)( pending)? commit=([0-9a-f]{7,40}) tree=([0-9a-f]{16}) body=([0-9a-f]{16}) -->$/;

/** Every section of a page, in order; throws on a marker that does not parse or a section left open. */
export function parseSections(page: string): Section[] {
  const lines = page.split('\n');
  const sections: Section[] = [];
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index] as string;
    if (!line.startsWith('<!-- record:')) continue;
    const match = OPENING.exec(line);
    if (!match) throw new Error(`BENCHMARKS.md line ${index + 1}: a record marker that does not parse: ${line}`);
    const name = match[1] as string;
    const end = lines.indexOf(`<!-- /record:${name} -->`, index + 1);
    if (end === -1) throw new Error(`BENCHMARKS.md: section ${name} is not closed`);
    const stamp = { epoch: Number(match[2]), pending: match[3] !== undefined, commit: match[4] as string, tree: match[5] as string, body: match[6] as string };
    sections.push({ name, stamp, text: lines.slice(index + 1, end).join('\n') });
    index = end;
  }
  return sections;
}

/**
 * The page with section `name` replaced by `section` (formatSection's). A page without one gets it before the first
 * of `later` (the scenarios after it, in order) that it has, or at the end, so the page keeps the scenarios' order.
 */
export function replaceSection(page: string, name: string, section: string, later: readonly string[] = []): string {
  const start = page.indexOf(`<!-- record:${name} `);
  const closing = `<!-- /record:${name} -->`;
  if (start === -1) {
    const next = later.map((other) => page.indexOf(`<!-- record:${other} `)).find((index) => index !== -1);
    if (next !== undefined) return `${page.slice(0, next)}${section}\n${page.slice(next)}`;
    return `${page.replace(/\n*$/, '')}\n${section}\n`;
  }
  const end = page.indexOf(closing, start);
  if (end === -1) throw new Error(`BENCHMARKS.md: section ${name} is not closed`);
  return page.slice(0, start) + section + page.slice(end + closing.length);
}

/** What is wrong with a section against its scenario's current epoch (git checks are the caller's). */
export function sectionProblems(section: Section, currentEpoch: number | undefined): string[] {
  const problems: string[] = [];
  if (currentEpoch === undefined) problems.push(`${section.name}: no such scenario in bench/record-scenarios.ts`);
  else if (section.stamp.epoch !== currentEpoch) problems.push(`${section.name}: written at epoch ${section.stamp.epoch}, the scenario is at ${currentEpoch}: record it again`);
  if (hashText(section.text) !== section.stamp.body) problems.push(`${section.name}: its body was edited by hand (hash ${hashText(section.text)}, stamp ${section.stamp.body}): record it again`);
  if (section.stamp.pending && !section.text.split('\n').slice(0, 3).includes(PENDING_NOTICE)) problems.push(`${section.name}: pending without the notice that says so`);
  return problems;
}
