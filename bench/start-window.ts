/**
 * The window in which no Node program can handle a signal: from spawn() to its first statement, Node itself starts,
 * and a SIGHUP then ends the process by Node's default (docs/deploying.md, "Signals are handled from the first
 * instruction"). The bin installs its handlers in that first statement; this measures the floor under it.
 *
 *   npm run --silent compile && node dist/bench/start-window.js [RUNS] [--record]
 *
 * 1. Spawn to first statement: a module whose first statement reads the clock, started RUNS times.
 * 2. A SIGHUP at 20, 50, 90 and 130 ms after spawn() returns, to a module whose first statement handles it: how many
 *    of RUNS lived.
 * 3. What a launcher could hand down, read from /proc once Node runs: SIGHUP ignored (`trap '' HUP; exec node`) and
 *    SIGHUP blocked (`env --block-signal=HUP node`, GNU coreutils). Node resets both at its start, so neither covers
 *    the window.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { percentile, round } from './metrics.js';
import { finishRecording, recordIfAsked } from './recorder.js';

await recordIfAsked('start-window');
const runs = Number(process.argv[2] ?? 20);
const SIGHUP_BIT = 1n << 0n;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-start-window-'));
const clockFirst = path.join(dir, 'clock-first.mjs');
fs.writeFileSync(clockFirst, "process.stdout.write(String(process.hrtime.bigint()));\n");
const handlerFirst = path.join(dir, 'handler-first.mjs');
fs.writeFileSync(handlerFirst, "process.on('SIGHUP', () => {});\nsetTimeout(() => process.stdout.write('alive'), 300);\n");

/** Starts `args` under this Node; `signal` is sent `afterMs` after spawn() returns, when given. */
function run(args: string[], signal?: { name: NodeJS.Signals; afterMs: number }): { spawnedAt: bigint; ended: Promise<{ out: string; signal: NodeJS.Signals | null }> } {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const spawnedAt = process.hrtime.bigint();
  if (signal) setTimeout(() => child.kill(signal.name), signal.afterMs);
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return { spawnedAt, ended: new Promise((resolve) => child.on('close', (_code, ended) => resolve({ out, signal: ended }))) };
}

/** Whether the Node started by `command` still has SIGHUP ignored or blocked once it runs JavaScript (/proc). */
async function handedDown(command: string, args: string[]): Promise<{ ignored: boolean; blocked: boolean }> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve) => child.stdout.once('data', resolve));
  const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
  const mask = (name: string) => BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? '0'}`);
  child.kill('SIGKILL');
  return { ignored: (mask('SigIgn') & SIGHUP_BIT) !== 0n, blocked: (mask('SigBlk') & SIGHUP_BIT) !== 0n };
}

try {
  const firstStatementMs: number[] = [];
  for (let index = 0; index < runs; index += 1) {
    const { spawnedAt, ended } = run([clockFirst]);
    firstStatementMs.push(Number(BigInt((await ended).out) - spawnedAt) / 1e6);
  }
  firstStatementMs.sort((a, b) => a - b);

  const livedThroughSighup: Record<string, string> = {};
  for (const afterMs of [20, 50, 90, 130]) {
    let lived = 0;
    for (let index = 0; index < runs; index += 1) {
      const { out, signal } = await run([handlerFirst], { name: 'SIGHUP', afterMs }).ended;
      if (signal === null && out === 'alive') lived += 1;
    }
    livedThroughSighup[`${afterMs} ms`] = `${lived} of ${runs}`;
  }

  const waitForJs = ['-e', "process.stdout.write('up'); setTimeout(() => {}, 10_000)"];
  const result = {
    node: process.version,
    load: os.loadavg().map((value) => round(value, 2)),
    spawnToFirstStatementMs: { min: round(firstStatementMs[0] as number), median: round(percentile(firstStatementMs, 50)), max: round(firstStatementMs.at(-1) as number) },
    livedThroughSighup,
    sighupStillIgnoredAfter: (await handedDown('sh', ['-c', `trap '' HUP; exec "${process.execPath}" "$@"`, 'sh', ...waitForJs])).ignored,
    sighupStillBlockedAfter: (await handedDown('env', ['--block-signal=HUP', process.execPath, ...waitForJs])).blocked,
  };
  const first = result.spawnToFirstStatementMs;
  finishRecording({
    headline: `spawn to first statement ${first.min} / ${first.median} / ${first.max} ms (min / median / max of ${runs})`,
    details: [
      '| SIGHUP after spawn | processes that lived |',
      '| ---: | ---: |',
      ...Object.entries(livedThroughSighup).map(([after, lived]) => `| ${after} | ${lived} |`),
      '',
      `SIGHUP still ignored once Node runs: ${result.sighupStillIgnoredAfter ? 'yes' : 'no'}; still blocked: ${result.sighupStillBlockedAfter ? 'yes' : 'no'}.`,
    ],
    ratios: [],
  });
  process.stdout.write(JSON.stringify(result) + '\n');
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
