/**
 * One client alone on a real `plantstore serve` in its default configuration (SQLite), creating plants from one
 * address, with the HTTP clients people use (test/helpers/clients.ts), at 16, 100 and 1,000 concurrent creates: the
 * rate, the share of the same client's rate at 16, the median and maximum latency, the answers that were not 2xx and
 * the requests that got no answer, and the CPU seconds the client (its processes) and the server spent: a client
 * that spends more than the server is limited by itself. A fresh server per client, so that one client's
 * connections do not linger into the next one's run. What it asks (docs/connections.md): at 100 and 1,000, a rate of
 * at least 0.8 of the rate at 16, 0 non-2xx, 0 transport errors, a maximum latency of at most 2 s at 100 and 5 s at
 * 1,000.
 *
 *   npm run --silent compile && node dist/bench/clients.js [client ...]
 *   npm run --silent compile && node dist/bench/clients.js contention [MAX_PENDING_REQUESTS]
 *   npm run --silent compile && node dist/bench/clients.js --record
 *
 * `client` is any of the names in the table (e.g. fetch 'ab -k'); default: every one installed. `contention`: two
 * undici Pools at once from two addresses, one on 1,000 connections and one on 10, and the one on 10 alone, on one
 * server: each one's rate, median and maximum latency (docs/connections.md). A large MAX_PENDING_REQUESTS (a quarter of
 * it is the handlers in flight) shows the same without turns. Without names, every client then the contention run,
 * and the figures BENCHMARKS.md's section holds, which `--record` writes there (bench/recorder.ts).
 */
import fs from 'node:fs';
import os from 'node:os';
import type { ClientSummary } from '../test/helpers/client-summary.js';
import { CLIENT_KINDS, ClientWorkspace, prerequisitesOf, type ClientKind } from '../test/helpers/clients.js';
import { sqliteDatabase } from '../test/helpers/databases.js';
import { createToken, startServer } from '../test/helpers/process.js';
import { CLOCK_TICKS, cpuSeconds, round } from './metrics.js';
import { finishRecording, recordIfAsked, type RunFigures } from './recorder.js';
import { plantstoreEnv } from './servers.js';

/** Creates sent at each concurrency: several rounds of the largest, few enough for a fresh machine's ports. */
const TOTALS = new Map([
  [16, 3000],
  [100, 4000],
  [1000, 6000],
]);
const MAX_LATENCY_MS = new Map([
  [100, 2000],
  [1000, 5000],
]);

interface Run {
  readonly concurrency: number;
  readonly summary: ClientSummary;
  readonly rate: number;
  readonly share: number;
  readonly problems: readonly string[];
}

interface Contention {
  readonly alone: ClientSummary;
  readonly heavy: ClientSummary;
  readonly light: ClientSummary;
}

const loadNow = () => os.loadavg().map((load) => load.toFixed(1)).join(' ');
const rate = (summary: ClientSummary) => (summary.sent / summary.elapsedMs) * 1000;
const count = (counts: Record<string, number>) => Object.values(counts).reduce((sum, value) => sum + value, 0);

/** CPU seconds of this process's waited-for children so far (/proc/self/stat cutime + cstime): the client processes. */
function childrenCpuSeconds(): number {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS;
}

/** Each client in `kinds` alone on a fresh server at each concurrency of TOTALS, printed as it goes. */
async function alone(kinds: readonly ClientKind[]): Promise<Map<ClientKind, Run[]>> {
  const workspace = new ClientWorkspace();
  const results = new Map<ClientKind, Run[]>();
  console.log(`plantstore serve, defaults, SQLite, Node ${process.version}, load average ${loadNow()}`);
  console.log('| client | concurrency | creates | creates/s | of the rate at 16 | p50 ms | max ms | not 2xx | transport errors | client CPU s | server CPU s | verdict |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- |');
  let firstId = 1n;
  try {
    for (const kind of kinds) {
      const db = await sqliteDatabase();
      const env = plantstoreEnv(db.url);
      const token = createToken('clients', env);
      const server = await startServer({ ...env, LOG_LEVEL: 'warn' });
      const pid = server.child.pid as number;
      const runs: Run[] = [];
      try {
        let baseline = 0;
        for (const [concurrency, total] of TOTALS) {
          const [clientBefore, serverBefore] = [childrenCpuSeconds(), cpuSeconds(pid)];
          const summary = await workspace.run(kind, { base: server.base, token, concurrency, total, firstId });
          const [clientCpu, serverCpu] = [childrenCpuSeconds() - clientBefore, cpuSeconds(pid) - serverBefore];
          firstId += BigInt(total);
          if (concurrency === 16) baseline = rate(summary);
          const share = rate(summary) / baseline;
          const limit = MAX_LATENCY_MS.get(concurrency);
          const problems: string[] = [];
          if (limit !== undefined) {
            if (share < 0.8) problems.push('rate');
            if (summary.maxMs > limit) problems.push('latency');
          }
          if (Object.keys(summary.statuses).length > 0) problems.push('non-2xx');
          if (Object.keys(summary.errors).length > 0) problems.push('errors');
          runs.push({ concurrency, summary, rate: rate(summary), share, problems });
          console.log(
            `| ${kind} | ${concurrency} | ${summary.sent} | ${rate(summary).toFixed(0)} | ${share.toFixed(2)} | ${summary.p50Ms.toFixed(1)} | ${summary.maxMs.toFixed(0)} | ` +
              `${JSON.stringify(summary.statuses)} | ${JSON.stringify(summary.errors)} | ${clientCpu.toFixed(1)} | ${serverCpu.toFixed(1)} | ` +
              `${problems.length > 0 ? `not met: ${problems.join(', ')}` : limit === undefined ? 'baseline' : 'met'} |`,
          );
        }
      } finally {
        await server.kill();
        await db.cleanup();
      }
      results.set(kind, runs);
    }
  } finally {
    workspace.cleanup();
  }
  const failures = [...results.values()].flat().filter((run) => run.problems.length > 0).length;
  console.log(`load average after: ${loadNow()}; ${failures} row(s) not met`);
  return results;
}

/** An undici Pool on 10 connections alone, then beside one on 1,000 from another address, on one server. */
async function contention(pending?: string): Promise<Contention> {
  const db = await sqliteDatabase();
  const env = plantstoreEnv(db.url);
  const token = createToken('contention', env);
  const server = await startServer({ ...env, LOG_LEVEL: 'warn', ...(pending ? { MAX_PENDING_REQUESTS: pending } : {}) });
  const workspace = new ClientWorkspace();
  const row = (name: string, summary: ClientSummary) =>
    console.log(`| ${name} | ${summary.sent} | ${rate(summary).toFixed(0)} | ${summary.p50Ms.toFixed(1)} | ${summary.p99Ms.toFixed(0)} | ${summary.maxMs.toFixed(0)} | ${JSON.stringify(summary.statuses)} | ${JSON.stringify(summary.errors)} |`);
  try {
    console.log(`plantstore serve, ${pending ? `MAX_PENDING_REQUESTS=${pending}` : 'defaults'}, SQLite, Node ${process.version}, load average ${loadNow()}`);
    console.log('| client | creates | creates/s | p50 ms | p99 ms | max ms | not 2xx | transport errors |');
    console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |');
    const lone = await workspace.run('undici Pool', { base: server.base, token, concurrency: 10, total: 3000, firstId: 1n, localAddress: '127.0.0.3' });
    row('10 connections, alone (127.0.0.3)', lone);
    const [heavy, light] = await Promise.all([
      workspace.run('undici Pool', { base: server.base, token, concurrency: 1000, total: 20_000, firstId: 100_000n, localAddress: '127.0.0.2' }),
      workspace.run('undici Pool', { base: server.base, token, concurrency: 10, total: 3000, firstId: 200_000n, localAddress: '127.0.0.3' }),
    ]);
    row('1,000 connections (127.0.0.2), beside the next', heavy);
    row('10 connections (127.0.0.3), beside the one above', light);
    console.log(`load average after: ${loadNow()}`);
    return { alone: lone, heavy, light };
  } finally {
    workspace.cleanup();
    await server.kill();
    await db.cleanup();
  }
}

/** The section's figures: a row per client, and one line for the contention run. */
function figuresOf(results: ReadonlyMap<ClientKind, Run[]>, shared: Contention): RunFigures {
  const at = (runs: Run[], concurrency: number) => runs.find((run) => run.concurrency === concurrency);
  const rows: string[] = [];
  let lowest: { kind: ClientKind; share: number } | undefined;
  let notMet = 0;
  for (const [kind, runs] of results) {
    const [low, mid, high] = [at(runs, 16), at(runs, 100), at(runs, 1000)];
    const ratio = high && low ? high.rate / low.rate : Number.NaN;
    if (lowest === undefined || ratio < lowest.share) lowest = { kind, share: ratio };
    notMet += runs.filter((run) => run.problems.length > 0).length;
    const non2xx = runs.reduce((sum, run) => sum + count(run.summary.statuses), 0);
    const errors = runs.reduce((sum, run) => sum + count(run.summary.errors), 0);
    rows.push(
      `| ${kind} | ${Math.round(low?.rate ?? Number.NaN)} | ${Math.round(mid?.rate ?? Number.NaN)} | ${Math.round(high?.rate ?? Number.NaN)} | ${round(ratio, 2)} | ` +
        `${Math.round(mid?.summary.maxMs ?? Number.NaN)} | ${Math.round(high?.summary.maxMs ?? Number.NaN)} | ${non2xx} | ${errors} |`,
    );
  }
  const figures = (summary: ClientSummary) => `${Math.round(rate(summary))} creates/s, p50 ${round(summary.p50Ms)} ms, p99 ${Math.round(summary.p99Ms)} ms`;
  return {
    headline: `lowest rate at 1,000 ÷ at 16: ${round(lowest?.share ?? Number.NaN, 2)} (${lowest?.kind ?? 'none'}); ${notMet} of ${results.size * 2} rows at 100 and 1,000 not met`,
    details: [
      '| client | creates/s at 16 | at 100 | at 1,000 | 1,000 ÷ 16 | max ms at 100 | at 1,000 | not 2xx | transport errors |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...rows,
      '',
      `Contention (undici Pools): 10 connections alone ${figures(shared.alone)}; beside 1,000 connections from another address ${figures(shared.light)} (the 1,000: ${figures(shared.heavy)}).`,
    ],
    ratios: [],
  };
}

await recordIfAsked('clients');
if (process.argv[2] === 'contention') {
  await contention(process.argv[3]);
  process.exit(0);
}
const names = process.argv.slice(2);
const unknown = names.filter((name) => !(CLIENT_KINDS as readonly string[]).includes(name));
if (unknown.length > 0) {
  // A misspelt client (or --help) would otherwise run nothing and fail in the summary.
  const usage = `usage: node dist/bench/clients.js [client ...] | contention [MAX_PENDING_REQUESTS] | --record\nclients: ${CLIENT_KINDS.map((kind) => JSON.stringify(kind)).join(', ')}`;
  const help = unknown.every((name) => name === '--help' || name === '-h');
  (help ? console.log : console.error)(help ? usage : `clients.js: unknown client ${unknown.map((name) => JSON.stringify(name)).join(', ')}\n${usage}`);
  process.exit(help ? 0 : 2);
}
const asked = names as ClientKind[];
const kinds = (asked.length > 0 ? asked : CLIENT_KINDS).filter((kind) => {
  const missing = prerequisitesOf(kind).filter((prerequisite) => prerequisite.location === undefined);
  if (missing.length > 0) console.log(`${kind}: skipped, ${missing.map((prerequisite) => prerequisite.missing).join('; ')}`);
  return missing.length === 0;
});
const results = await alone(kinds);
// Every client (no names given, as --record runs): the contention run too, and the figures a section holds.
if (asked.length === 0) {
  const figures = figuresOf(results, await contention());
  console.log(['', figures.headline, '', ...figures.details].join('\n'));
  finishRecording(figures);
}
