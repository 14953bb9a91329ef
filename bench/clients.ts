/**
 * One client alone on a real `plantstore serve` in its default configuration (SQLite), creating plants from one
 * address, with the HTTP clients people use (test/helpers/clients.ts), at 16, 100 and 1,000 concurrent creates: the
 * rate, the share of the same client's rate at 16, the median and maximum latency, the answers that were not 2xx and
 * the requests that got no answer. A fresh server per client, so that one client's connections do not linger into
 * the next one's run. What it asks (docs/connections.md): at 100 and 1,000, a rate of at least 0.8 of the rate at
 * 16, 0 non-2xx, 0 transport errors, a maximum latency of at most 2 s at 100 and 5 s at 1,000.
 *
 *   npm run --silent compile && node dist/bench/clients.js [client ...]
 *   npm run --silent compile && node dist/bench/clients.js contention [MAX_PENDING_REQUESTS]
 *
 * `client` is any of the names in the table (e.g. fetch 'ab -k'); default: every one installed. `contention`: two
 * undici Pools at once from two addresses, one on 1,000 connections and one on 10, and the one on 10 alone, on one
 * server: each one's rate, median and maximum latency (docs/connections.md). A large MAX_PENDING_REQUESTS (a quarter of
 * it is the handlers in flight) shows the same without turns.
 */
import os from 'node:os';
import type { ClientSummary } from '../test/helpers/client-summary.js';
import { CLIENT_KINDS, ClientWorkspace, prerequisitesOf, type ClientKind } from '../test/helpers/clients.js';
import { sqliteDatabase } from '../test/helpers/databases.js';
import { createToken, startServer } from '../test/helpers/process.js';
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

const asked = process.argv.slice(2) as ClientKind[];
const kinds = (asked.length > 0 ? asked : CLIENT_KINDS).filter((kind) => {
  const missing = prerequisitesOf(kind).filter((prerequisite) => prerequisite.location === undefined);
  if (missing.length > 0) console.log(`${kind}: skipped, ${missing.map((prerequisite) => prerequisite.missing).join('; ')}`);
  return missing.length === 0;
});

const rate = (summary: ClientSummary) => (summary.sent / summary.elapsedMs) * 1000;
if (process.argv[2] === 'contention') {
  await contention();
  process.exit(0);
}
const workspace = new ClientWorkspace();
console.log(`plantstore serve, defaults, SQLite, Node ${process.version}, load average ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}`);
console.log('| client | concurrency | creates | creates/s | of the rate at 16 | p50 ms | max ms | not 2xx | transport errors | verdict |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |');
let failures = 0;
let firstId = 1n;
try {
  for (const kind of kinds) {
    const db = await sqliteDatabase();
    const env = plantstoreEnv(db.url);
    const token = createToken('clients', env);
    const server = await startServer({ ...env, LOG_LEVEL: 'warn' });
    try {
      let baseline = 0;
      for (const [concurrency, total] of TOTALS) {
        const summary = await workspace.run(kind, { base: server.base, token, concurrency, total, firstId });
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
        if (problems.length > 0) failures += 1;
        console.log(
          `| ${kind} | ${concurrency} | ${summary.sent} | ${rate(summary).toFixed(0)} | ${share.toFixed(2)} | ${summary.p50Ms.toFixed(1)} | ${summary.maxMs.toFixed(0)} | ` +
            `${JSON.stringify(summary.statuses)} | ${JSON.stringify(summary.errors)} | ${problems.length > 0 ? `not met: ${problems.join(', ')}` : limit === undefined ? 'baseline' : 'met'} |`,
        );
      }
    } finally {
      await server.kill();
      await db.cleanup();
    }
  }
} finally {
  workspace.cleanup();
}
console.log(`load average after: ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}; ${failures} row(s) not met`);

async function contention(): Promise<void> {
  const db = await sqliteDatabase();
  const env = plantstoreEnv(db.url);
  const token = createToken('contention', env);
  const pending = process.argv[3];
  const server = await startServer({ ...env, LOG_LEVEL: 'warn', ...(pending ? { MAX_PENDING_REQUESTS: pending } : {}) });
  const workspace = new ClientWorkspace();
  const row = (name: string, summary: ClientSummary) =>
    console.log(`| ${name} | ${summary.sent} | ${rate(summary).toFixed(0)} | ${summary.p50Ms.toFixed(1)} | ${summary.p99Ms.toFixed(0)} | ${summary.maxMs.toFixed(0)} | ${JSON.stringify(summary.statuses)} | ${JSON.stringify(summary.errors)} |`);
  try {
    console.log(`plantstore serve, ${pending ? `MAX_PENDING_REQUESTS=${pending}` : 'defaults'}, SQLite, Node ${process.version}, load average ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}`);
    console.log('| client | creates | creates/s | p50 ms | p99 ms | max ms | not 2xx | transport errors |');
    console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |');
    row('10 connections, alone (127.0.0.3)', await workspace.run('undici Pool', { base: server.base, token, concurrency: 10, total: 3000, firstId: 1n, localAddress: '127.0.0.3' }));
    const [heavy, light] = await Promise.all([
      workspace.run('undici Pool', { base: server.base, token, concurrency: 1000, total: 20_000, firstId: 100_000n, localAddress: '127.0.0.2' }),
      workspace.run('undici Pool', { base: server.base, token, concurrency: 10, total: 3000, firstId: 200_000n, localAddress: '127.0.0.3' }),
    ]);
    row('1,000 connections (127.0.0.2), beside the next', heavy);
    row('10 connections (127.0.0.3), beside the one above', light);
    console.log(`load average after: ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}`);
  } finally {
    workspace.cleanup();
    await server.kill();
    await db.cleanup();
  }
}
