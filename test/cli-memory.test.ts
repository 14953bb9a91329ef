import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { CLI, runCli } from './helpers/process.js';
import { waitFor } from './helpers/wait.js';

const PROBE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'helpers', 'heap-probe.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-cli-memory-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A migrated SQLite database of `rows` plants with the longest names the default limit allows: many bytes per row. */
function database(rows: number): string {
  const file = path.join(dir, `${rows}.db`);
  runCli(['migrate'], { DATABASE_URL: `sqlite:${file}` });
  const db = new Database(file);
  const insert = db.prepare<[bigint, string]>('INSERT INTO plants (id, name) VALUES (?, ?)');
  const name = 'x'.repeat(256);
  db.transaction(() => {
    for (let k = 1; k <= rows; k += 1) insert.run(BigInt(k) * 1_000_003n, name);
  })();
  db.close();
  return file;
}

/**
 * The largest V8 heap any process of one `plantstore export` committed, in MiB. `nodeOptions` set to heap limits of the
 * operator's own runs the export in-process with them, as V8 would size the heap unbounded.
 */
function exportHeapMiB(file: string, nodeOptions = ''): number {
  const result = spawnSync(process.execPath, ['--import', PROBE, CLI, 'export', '--out', path.join(dir, 'out.jsonl')], {
    env: { ...process.env, DATABASE_URL: `sqlite:${file}`, NODE_OPTIONS: nodeOptions },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(result.status, 0, result.stderr);
  const sizes = [...result.stderr.matchAll(/heap-probe heapTotalMiB=([0-9.]+)/g)].map((match) => Number(match[1]));
  assert.ok(sizes.length > 0, result.stderr);
  return Math.max(...sizes);
}

test('export keeps its heap bounded: twenty times the rows stay under a fixed heap, well under what V8 takes unbounded', () => {
  const small = exportHeapMiB(database(20_000));
  const largeFile = database(400_000);
  const large = exportHeapMiB(largeFile);
  const unbounded = exportHeapMiB(largeFile, '--max-old-space-size=4096');
  // Left to itself V8 widens the young generation and lets the old one fill with garbage as rows stream through; the
  // CLI's bounded child keeps both near the live heap, whatever the row count. The heap is sampled every 5 ms, so the
  // bounds leave room for where a sample and a collection happen to fall (Node 24: 30 MiB for 20000 rows, 37–46
  // for 400000, 64 unbounded).
  const figures = `20000 rows: ${small} MiB; 400000 rows: ${large} MiB, unbounded ${unbounded} MiB`;
  assert.ok(small < 56 && large < 56, `the heap passed a bound that does not depend on the row count: ${figures}`);
  assert.ok(large < unbounded * 0.85, `the bound made no difference: ${figures}`);
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
        child = childrenOf(launcher.pid as number).find((candidate) => candidate.cmdline.includes('commands.js'));
        return child !== undefined;
      });
      assert.match(child?.cmdline ?? '', /--max-old-space-size=128 .*commands\.js import/);
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
