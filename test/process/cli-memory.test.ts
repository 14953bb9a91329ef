import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { BOUNDED_HEAP_FLAGS } from '../../src/cli/heap-limits.js';
import { prepareWrite, transaction } from '../../src/storage/sqlite/connection.js';
import { CLI, runCli } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

const PROBE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'helpers', 'heap-probe.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-cli-memory-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A migrated SQLite database of `rows` plants with the longest names the default limit allows: many bytes per row. */
function database(rows: number): string {
  const file = path.join(dir, `${rows}.db`);
  runCli(['migrate'], { DATABASE_URL: `sqlite:${file}` });
  const db = new DatabaseSync(file);
  const insert = prepareWrite<[bigint, string]>(db, 'INSERT INTO plants (id, name) VALUES (?, ?)');
  const name = 'x'.repeat(256);
  transaction(db, () => {
    for (let k = 1; k <= rows; k += 1) insert.run(BigInt(k) * 1_000_003n, name);
  });
  db.close();
  return file;
}

/** What `test/helpers/heap-probe.ts` reports for one process. */
interface HeapReport {
  liveMiB: number;
  samples: number;
  execArgv: string[];
}

/** Runs `plantstore export` of `file` under the heap probe: one report per Node process the command ran in. */
function exportReports(file: string, nodeOptions = '', cliFlags: readonly string[] = []): HeapReport[] {
  const result = spawnSync(
    process.execPath,
    ['--expose-gc', '--import', PROBE, ...cliFlags, CLI, 'export', '--out', path.join(dir, 'out.jsonl')],
    { env: { ...process.env, DATABASE_URL: `sqlite:${file}`, NODE_OPTIONS: nodeOptions }, encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(result.status, 0, result.stderr);
  return [...result.stderr.matchAll(/^heap-probe (.*)$/gm)].map((match) => JSON.parse(match[1] as string) as HeapReport);
}

const bounded = (report: HeapReport) => BOUNDED_HEAP_FLAGS.every((flag) => report.execArgv.includes(flag));

/** The report of the bounded child an export runs in, beside its launcher. */
function exportChild(file: string): HeapReport {
  const reports = exportReports(file);
  assert.equal(reports.length, 2, `the launcher and one child: ${JSON.stringify(reports)}`);
  const child = reports.find(bounded);
  assert.ok(child, `one process ran with ${BOUNDED_HEAP_FLAGS.join(' ')}: ${JSON.stringify(reports)}`);
  return child;
}

test('export keeps alive a heap that does not grow with the row count, in a child with the bounded heap flags', () => {
  const small = exportChild(database(20_000));
  const large = exportChild(database(400_000));
  // 380 000 more rows of about 300 bytes each: keeping even a twentieth of them would add 5 MiB.
  const figures = `live heap 20000 rows: ${small.liveMiB} MiB, 400000 rows: ${large.liveMiB} MiB (${large.samples} samples)`;
  assert.ok(large.samples >= 10, `sampled while the rows streamed: ${figures}`);
  assert.ok(large.liveMiB - small.liveMiB < 4, `the live heap grew with the row count: ${figures}`);
});

test('heap limits the operator chose are kept: export then runs in the one process, with them', () => {
  const file = database(10);
  const choices: ReadonlyArray<{ nodeOptions: string; cliFlags: readonly string[] }> = [
    { nodeOptions: '--max-old-space-size=4096', cliFlags: [] },
    { nodeOptions: '', cliFlags: ['--max-semi-space-size=8'] },
  ];
  for (const { nodeOptions, cliFlags } of choices) {
    const reports = exportReports(file, nodeOptions, cliFlags);
    assert.equal(reports.length, 1, JSON.stringify(reports));
    assert.equal(reports.some(bounded), false, JSON.stringify(reports));
    for (const flag of cliFlags) assert.ok(reports[0]?.execArgv.includes(flag), JSON.stringify(reports));
  }
});

/** The pids whose parent is `pid` (from /proc), with their command lines. */
function childrenOf(pid: number): Array<{ pid: number; cmdline: string }> {
  const found: Array<{ pid: number; cmdline: string }> = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The parent pid is the 2nd field after the parenthesised command name, which may itself hold spaces.
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === pid) found.push({ pid: Number(entry), cmdline: fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ') });
    } catch {
      // The process ended while it was read.
    }
  }
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

for (const [index, signal] of (['SIGTERM', 'SIGINT'] as const).entries()) {
  test(`${signal} to plantstore import reaches the bounded child, and plantstore ends by that signal`, async () => {
    const file = database(index + 1);
    // import from a standard input that never ends: a FIFO this test holds open for writing. (A pipe from spawn would
    // be closed when the launcher exits, and the child would then end by itself at end of input, signal or not.)
    const fifo = path.join(dir, `stdin-${signal}`);
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const stdin = fs.openSync(fifo, fs.constants.O_RDWR);
    const launcher = spawn(process.execPath, [CLI, 'import'], {
      env: { ...process.env, DATABASE_URL: `sqlite:${file}`, NODE_OPTIONS: '' },
      stdio: [stdin, 'ignore', 'pipe'],
    });
    let stderr = '';
    launcher.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      launcher.on('exit', (code, signal) => resolve({ code, signal })),
    );
    let child: { pid: number; cmdline: string } | undefined;
    try {
      await waitFor('the bounded child Node', () => {
        child = childrenOf(launcher.pid as number).find((candidate) => candidate.cmdline.includes('dispatch.js'));
        return child !== undefined;
      });
      assert.match(child?.cmdline ?? '', /--max-old-space-size=128 .*dispatch\.js import/);
      launcher.kill(signal);
      const result = await exited;
      assert.deepEqual(result, { code: null, signal }, stderr);
      await waitFor('the child to end', () => !alive(child?.pid as number), { timeoutMs: 5000 });
    } finally {
      if (child && alive(child.pid)) process.kill(child.pid, 'SIGKILL');
      fs.closeSync(stdin);
    }
  });
}
