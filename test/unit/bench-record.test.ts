/**
 * BENCHMARKS.md is written by `--record` (bench/record.ts, bench/recorder.ts): the writer, on synthetic runs; and the
 * page in the tree, every section as the bench wrote it (its body's hash), at its scenario's epoch
 * (bench/record-scenarios.ts), stamped with a commit of this history and that commit's measured trees.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  formatSection,
  judgeQuiet,
  pairSpread,
  parseSections,
  PENDING_NOTICE,
  QUIET,
  renderBody,
  compactDetails,
  renderPendingBody,
  replaceSection,
  sectionProblems,
  type RecordedRun,
} from '../../bench/record.js';
import { benchScenario, SCENARIOS, scenario } from '../../bench/record-scenarios.js';
import { figuresFromMarkdown, git, measuredTree, pairRatios } from '../../bench/recorder.js';
import { readOptions } from '../../bench/options.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const PAGE_LINES = 300;

const quietSample = { loadBefore: [0.2, 0.4, 0.5], busyBefore: 0.004, loadAfter: [1.9, 1.1, 0.7], othersShare: 0.01, stealShare: 0 };

function run(overrides: Partial<RecordedRun> = {}): RecordedRun {
  return {
    title: 'Creates: durable, app-only and the ceiling',
    measures: 'Durable creates against the ceiling.',
    command: 'npm run bench -- --app-only --record',
    machine: { cpu: 'AMD EPYC 7B13', cores: 2, node: 'v24.21.0', kernel: '6.18.44' },
    sample: quietSample,
    spread: 0.06,
    commit: 'a106117abcde',
    headline: 'plantstore ÷ ceiling 0.318',
    details: ['| pair | ratio |', '| ---: | ---: |', '| 1 | 0.318 |'],
    ...overrides,
  };
}

describe('the record writer', () => {
  it('renders a run into a section that parses back, stamp and body', () => {
    const body = renderBody(run());
    assert.match(body, /^## Creates: durable, app-only and the ceiling\n/);
    assert.match(body, /Machine: AMD EPYC 7B13, 2 cores, Node v24\.21\.0, Linux 6\.18\.44; 0\.4% busy in the 15 s before; load average 0\.2 0\.4 0\.5 before, 1\.9 1\.1 0\.7 after; other processes 1\.0% and steal 0\.0% of the CPU; pairs' spread 6\.0%\./);
    assert.match(body, /\*\*plantstore ÷ ceiling 0\.318\*\*/);
    const led = renderBody(run({ details: ['Load generator: wrk.', '', '| pair | ratio |', '| ---: | ---: |', '| 1 | 0.318 |'] })).split('\n');
    assert.match(led[2] ?? '', /^\*\*plantstore ÷ ceiling 0\.318\*\* · .+ Load generator: wrk\.$/, "the run's first paragraph joins the opening one");
    assert.deepEqual(led.slice(3), ['', '| pair | ratio |', '| ---: | ---: |', '| 1 | 0.318 |']);
    const section = formatSection('creates', { epoch: 2, pending: false, commit: 'a106117abcde', tree: '0123456789abcdef' }, body);
    const [parsed] = parseSections(`# Benchmarks\n\n${section}\n`);
    assert.ok(parsed);
    assert.equal(parsed.name, 'creates');
    assert.equal(parsed.text, body);
    assert.deepEqual({ ...parsed.stamp, body: undefined }, { epoch: 2, pending: false, commit: 'a106117abcde', tree: '0123456789abcdef', body: undefined });
    assert.deepEqual(sectionProblems(parsed, 2), []);
  });

  it('packs details into as few lines as render the same: a paragraph a line, a table a row a line', () => {
    const details = ['Load generator: wrk.', 'Pinning: core 0.', '', '', '| pair | ratio |', '| ---: | ---: |', '| 1 | 0.3 |', 'ceiling 50000 req/s', 'exit codes 0'];
    assert.deepEqual(compactDetails(details), [
      'Load generator: wrk. Pinning: core 0.',
      '',
      '| pair | ratio |',
      '| ---: | ---: |',
      '| 1 | 0.3 |',
      '',
      'ceiling 50000 req/s · exit codes 0',
    ]);
    assert.deepEqual(compactDetails(['- one stream: 200', '- two streams: 200', 'after the list']), ['- one stream: 200', '- two streams: 200', '', 'after the list']);
    assert.deepEqual(compactDetails([]), []);
  });

  it('replaces a section in place and adds one the page lacks in the scenarios\' order, leaving the rest alone', () => {
    const stamp = { epoch: 1, pending: false, commit: 'abcdef1', tree: '0123456789abcdef' };
    const first = formatSection('creates', stamp, renderBody(run()));
    const other = formatSection('feed', stamp, renderBody(run({ title: 'Change feed' })));
    const page = `# Benchmarks\n\nHeader.\n\n${first}\n\n${other}\n`;
    const again = formatSection('creates', stamp, renderBody(run({ headline: 'plantstore ÷ ceiling 0.4' })));
    const replaced = replaceSection(page, 'creates', again);
    assert.equal(replaced, `# Benchmarks\n\nHeader.\n\n${again}\n\n${other}\n`);
    const added = replaceSection(page, 'soak', formatSection('soak', stamp, renderBody(run({ title: 'Soak' }))));
    assert.deepEqual(parseSections(added).map((section) => section.name), ['creates', 'feed', 'soak']);
    assert.ok(added.startsWith(page.trimEnd()));
    const inserted = replaceSection(page, 'metrics', formatSection('metrics', stamp, renderBody(run({ title: 'Metrics' }))), ['soak', 'feed']);
    assert.deepEqual(parseSections(inserted).map((section) => section.name), ['creates', 'metrics', 'feed'], 'before the first later scenario the page has');
  });

  it('finds a body edited by hand, an old epoch, a pending section without its notice, and an unknown scenario', () => {
    const stamp = { epoch: 1, pending: false, commit: 'abcdef1', tree: '0123456789abcdef' };
    const page = formatSection('creates', stamp, renderBody(run())).replace('0.318**', '0.35**');
    const [edited] = parseSections(page);
    assert.ok(edited);
    const problems = sectionProblems(edited, 2);
    assert.equal(problems.length, 2);
    assert.match(problems[0] as string, /written at epoch 1, the scenario is at 2/);
    assert.match(problems[1] as string, /edited by hand/);
    const [quietPending] = parseSections(formatSection('feed', { ...stamp, pending: true }, renderPendingBody('Feed', 'What.', 'cmd', ['0.7'])));
    assert.ok(quietPending);
    assert.deepEqual(sectionProblems(quietPending, 1), []);
    const [silentPending] = parseSections(formatSection('feed', { ...stamp, pending: true }, renderBody(run())));
    assert.ok(silentPending);
    assert.match(sectionProblems(silentPending, 1).join('\n'), /pending without the notice/);
    assert.match(sectionProblems(silentPending, undefined).join('\n'), /no such scenario/);
    assert.throws(() => parseSections('<!-- record:creates epoch=x -->\n'), /does not parse/);
    assert.throws(() => parseSections(formatSection('creates', stamp, 'x').replace('<!-- /record:creates -->', '')), /not closed/);
  });

  it('calls a run quiet only under every threshold, and says which it passed', () => {
    assert.deepEqual(judgeQuiet(quietSample, [0.75, 0.8, 0.85]), { quiet: true, reasons: [], spread: pairSpread([0.75, 0.8, 0.85]) });
    assert.ok(Math.abs((pairSpread([0.75, 0.8, 0.85]) ?? 0) - 0.125) < 1e-9);
    assert.equal(judgeQuiet(quietSample, []).quiet, true, 'a scenario without pairs has no spread to judge');
    const busy = judgeQuiet({ ...quietSample, busyBefore: 0.31, othersShare: 0.2, stealShare: 0.08 }, [0.25, 0.375, 0.5]);
    assert.equal(busy.quiet, false);
    assert.equal(busy.reasons.length, 4);
    assert.match(busy.reasons.join('\n'), /31\.0% busy in the 15 s before the run, above 5\.0%/);
    assert.match(busy.reasons.join('\n'), /other processes used 20\.0% of the machine's CPU, above 5\.0%/);
    assert.match(busy.reasons.join('\n'), /stole 8\.0%/);
    assert.match(busy.reasons.join('\n'), /spread 66\.7% of their median, above 15\.0%/);
    assert.equal(judgeQuiet({ ...quietSample, othersShare: Number.NaN }, []).quiet, false, 'a sample that failed is not quiet');
    assert.equal(pairSpread([0.5]), null);
    assert.equal(pairSpread([1, 2, 3, 2]), 1);
  });

  it("takes a scenario's printed Markdown and result rows as a section's figures", () => {
    const markdown = [
      '### creates (sqlite) — 2026-12-01T00:00:00Z',
      '',
      'Command: `npm run bench`',
      'Load generator: wrk. Pinning: servers on core 0.',
      'Machine: 2 CPUs',
      '',
      '| pair | server | ratio |',
      '| 1 | plantstore | 0.3 |',
      '',
      '**Median ratio plantstore/ceiling: 0.3** · ceiling median 50000 req/s',
      '',
    ].join('\n');
    assert.deepEqual(figuresFromMarkdown(markdown, [0.3]), {
      headline: 'Median ratio plantstore/ceiling: 0.3',
      details: ['Load generator: wrk. Pinning: servers on core 0.', '', '| pair | server | ratio |', '| 1 | plantstore | 0.3 |', '', 'ceiling median 50000 req/s'],
      ratios: [0.3],
    });
    const rows = [
      { server: 'ceiling' },
      { server: 'app-only', ratio: 0.7 },
      { server: 'plantstore', ratio: 0.3 },
      { server: 'plantstore', ratio: 0.32 },
    ];
    assert.deepEqual(pairRatios(rows), [0.3, 0.32]);
    assert.deepEqual(pairRatios([{ workload: 'creates', ratio: 0.9 }, { workload: 'reads', ratio: 1.3 }, { workload: 'creates', ratio: 1 }]), [0.9, 1]);
    assert.deepEqual(pairRatios([{ pair: 1 }]), []);
  });

  it('records each bench command line in one section, and refuses comparisons', () => {
    const of = (...argv: string[]) => benchScenario(readOptions(argv) ?? assert.fail('options'), ROOT);
    assert.deepEqual(of('--app-only'), { name: 'creates' });
    assert.deepEqual(of('--baseline-env', 'METRICS=off'), { name: 'metrics' });
    assert.deepEqual(of('--store', 'postgres', '--app-only'), { name: 'postgres' });
    assert.deepEqual(of('--grown', '2000000,10000000'), { name: 'grown' });
    assert.ok('refused' in of('--prefill', '5000000', '--ids', 'random'));
    assert.deepEqual(of('--workers', '2'), { name: 'workers' });
    assert.ok('refused' in of('--quick'));
    assert.ok('refused' in of('--baseline', '/elsewhere'));
    assert.ok('refused' in of('--baseline-env', 'LOG_LEVEL=warn'));
    for (const { name, command } of SCENARIOS) {
      if (!command.startsWith('npm run bench -- ')) continue;
      const argv = command.replace('npm run bench -- ', '').split(' ');
      assert.deepEqual(of(...argv), { name }, `${command} records ${name}`);
    }
  });
});

describe('BENCHMARKS.md', () => {
  const page = fs.readFileSync(path.join(ROOT, 'BENCHMARKS.md'), 'utf8');
  const sections = parseSections(page);

  it(`holds one section per scenario, in order, and nothing else past its header, in at most ${PAGE_LINES} lines`, () => {
    assert.deepEqual(sections.map((section) => section.name), SCENARIOS.map((found) => found.name));
    assert.ok(page.split('\n').length <= PAGE_LINES, `${page.split('\n').length} lines`);
    const outside = page.slice(page.indexOf('<!-- record:')).replace(/<!-- record:[\s\S]*?<!-- \/record:[a-z0-9-]+ -->/g, '').trim();
    assert.equal(outside, '', 'text between or after the sections: a section holds it, or git history does');
  });

  it("states in its header what a quiet machine is, as bench/record.ts's QUIET does", () => {
    const header = page.slice(0, page.indexOf('<!-- record:'));
    assert.ok(header.includes(`${QUIET.BEFORE_SECONDS} s before the run`), 'the quiet window before');
    assert.ok(header.includes(`${QUIET.OTHERS_SHARE * 100}%`), "other processes' share");
    assert.ok(header.includes(`${QUIET.PAIR_SPREAD * 100}%`), "the pairs' spread");
    assert.ok(header.includes('record-scenarios.ts'), 'where the epochs are');
  });

  it('has every section as the bench wrote it, at its scenario\'s epoch', (t) => {
    const problems = sections.flatMap((section) => sectionProblems(section, scenario(section.name)?.epoch));
    assert.deepEqual(problems, []);
    const pending = sections.filter((section) => section.stamp.pending).map((section) => section.name);
    if (pending.length > 0) t.diagnostic(`pending, to record on a quiet machine: ${pending.join(', ')}`);
    for (const section of sections.filter((candidate) => candidate.stamp.pending)) assert.ok(section.text.includes(PENDING_NOTICE));
  });

  it('stamps each section with a commit of this history and the trees it measured there', () => {
    assert.ok(git(['rev-parse', 'HEAD']).ok, 'a git checkout with its history (CI clones one)');
    const problems: string[] = [];
    for (const { name, stamp } of sections) {
      if (!git(['merge-base', '--is-ancestor', stamp.commit, 'HEAD']).ok) problems.push(`${name}: ${stamp.commit} is not a commit of this history`);
      else if (measuredTree(stamp.commit) !== stamp.tree) problems.push(`${name}: tree=${stamp.tree} is not what ${stamp.commit} holds`);
    }
    assert.deepEqual(problems, []);
  });
});
