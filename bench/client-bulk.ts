/**
 * plantstore/client's createMany against `plantstore push`: the same plants (ids from 2^53 + 1 up, shaped like the
 * bulk scenario's lines) sent to a fresh SQLite server each run, in the order push, client, client, push (so a drift of
 * the machine falls on both alike). The client runs as a child process of its own, so its resident memory is its
 * alone: sampled every 50 ms, growth is the peak less the RSS before the first plant. Not a test: figures for the
 * report, with the machine's load.
 *
 *   node dist/bench/client-bulk.js [--count N] [--push-cli PATH]   (--push-cli: another checkout's plantstore.js)
 *   node dist/bench/client-bulk.js --child URL TOKEN COUNT         (the client's side, run by the above)
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { PlantStore, type NewPlant } from '../src/client/index.js';
import { sqliteDatabase } from '../test/helpers/databases.js';
import { CLI, createToken, startServer } from '../test/helpers/process.js';

const FIRST = 2n ** 53n + 1n;
const NAMES = ['Monstera deliciosa', 'Ficus lyrata', 'Pilea peperomioides', 'Calathea orbifolia'];
const TAGS = ['aroid', 'fig', 'pilea', undefined];

function* plants(count: number): Generator<NewPlant> {
  for (let k = 0; k < count; k += 1) {
    const tag = TAGS[k % 4];
    yield tag === undefined ? { id: FIRST + BigInt(k), name: NAMES[k % 4] as string } : { id: FIRST + BigInt(k), name: NAMES[k % 4] as string, tag };
  }
}

async function child(url: string, token: string, count: number): Promise<void> {
  const before = process.memoryUsage.rss();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 50);
  const started = performance.now();
  let ok = 0;
  let other = 0;
  // Past the first results, fetch and the client are loaded and compiled: growth from here on is what the stream holds.
  let warm = 0;
  for await (const result of new PlantStore({ url, token }).createMany(plants(count))) {
    if (result.status === 200) ok += 1;
    else other += 1;
    if (ok + other === 10_000) warm = process.memoryUsage.rss();
  }
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  process.stdout.write(`${JSON.stringify({ seconds, ok, other, rssBeforeMiB: before / 2 ** 20, rssWarmMiB: warm / 2 ** 20, rssPeakMiB: peak / 2 ** 20 })}\n`);
}

function runNode(args: readonly string[]): Promise<{ stdout: string; stderr: string; seconds: number; code: number | null }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    proc.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    proc.on('exit', (code) => resolve({ stdout, stderr, code, seconds: (performance.now() - started) / 1000 }));
  });
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ options: { count: { type: 'string' }, 'push-cli': { type: 'string' }, child: { type: 'boolean' } }, allowPositionals: true });
  if (values.child) return child(positionals[0] as string, positionals[1] as string, Number(positionals[2]));
  const count = Number(values.count ?? 1_000_000);
  const pushCli = values['push-cli'] ?? CLI;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-client-bulk-'));
  const file = path.join(dir, 'plants.ndjson');
  const out = fs.openSync(file, 'w');
  let text = '';
  for (const plant of plants(count)) {
    text += plant.tag === undefined ? `{"id":${plant.id},"name":"${plant.name}"}\n` : `{"id":${plant.id},"name":"${plant.name}","tag":"${plant.tag}"}\n`;
    if (text.length > 1 << 20) {
      fs.writeSync(out, text);
      text = '';
    }
  }
  fs.writeSync(out, text);
  fs.closeSync(out);
  const self = fileURLToPath(import.meta.url);
  const rows: Array<Record<string, unknown>> = [];
  for (const run of ['push', 'client', 'client', 'push'] as const) {
    const db = await sqliteDatabase();
    const env = { DATABASE_URL: db.url };
    const token = createToken(`bench-${run}`, env);
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, token, { mode: 0o600 });
    const server = await startServer(env);
    try {
      if (run === 'push') {
        const result = await runNode([pushCli, 'push', file, '--url', server.base, '--token-file', tokenFile]);
        if (result.code !== 0) throw new Error(`push exited ${result.code}: ${result.stderr}`);
        rows.push({ run, seconds: result.seconds, perSecond: Math.round(count / result.seconds), summary: result.stderr.trim().split('\n').at(-1) });
      } else {
        const result = await runNode([self, '--child', server.base, token, String(count)]);
        if (result.code !== 0) throw new Error(`the client exited ${result.code}: ${result.stderr}`);
        const measured = JSON.parse(result.stdout) as { seconds: number; ok: number; other: number; rssBeforeMiB: number; rssWarmMiB: number; rssPeakMiB: number };
        rows.push({
          run,
          seconds: result.seconds,
          perSecond: Math.round(count / result.seconds),
          ok: measured.ok,
          other: measured.other,
          rssGrowthMiB: Number((measured.rssPeakMiB - measured.rssBeforeMiB).toFixed(1)),
          rssGrowthAfterWarmMiB: Number((measured.rssPeakMiB - measured.rssWarmMiB).toFixed(1)),
          rssPeakMiB: Number(measured.rssPeakMiB.toFixed(1)),
        });
      }
    } finally {
      await server.stop();
      await db.cleanup();
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
  for (const row of rows) process.stdout.write(`${JSON.stringify(row)}\n`);
  const mean = (run: string) => {
    const times = rows.filter((row) => row.run === run).map((row) => row.seconds as number);
    return times.reduce((a, b) => a + b, 0) / times.length;
  };
  process.stdout.write(`client/push throughput: ${(mean('push') / mean('client')).toFixed(3)} (${count} plants; load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')})\n`);
}

await main();
