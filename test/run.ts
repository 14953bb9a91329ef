/**
 * `npm test` after the build: every tier of test/README.md, in two runs of `node --test`.
 *
 * 1. Shared: the files that share the machine well, CONCURRENCY at a time. Most of a file's time is spent waiting
 *    (for a child process to start, a server to answer, a timer), not computing, so two files at once on two cores
 *    take little more than the longer of them.
 * 2. Alone: the files whose outcome depends on having the machine to themselves, one at a time: they bound a process's
 *    memory (RSS) or how long something takes, flood a server with connections, or time signals (ALONE, below).
 *
 * Each run starts one embedded PostgreSQL server for all its files (helpers/global-postgres.ts, through Node's
 * --test-global-setup, Node 24 and later; on Node 22 each file that needs one starts its own, as before). Every file
 * runs in its own process with the exit guard preloaded (helpers/exit-guard.ts). The exit status is non-zero when
 * either run failed; both always run.
 *
 * `node dist/test/run.js [TIER...]` runs only the tiers named (unit, http, storage, process, browser).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const TESTS = path.dirname(fileURLToPath(import.meta.url));
const TIERS = ['unit', 'storage', 'http', 'browser', 'process'] as const;

/** Files (relative to dist/test) that must have the machine to themselves, and why. */
const ALONE: ReadonlyMap<string, string> = new Map([
  ['process/bench-smoke.test.js', 'runs the bench: a load generator against a server, both busy on every core'],
  ['process/cli-memory.test.js', "bounds the CLI's peak RSS"],
  ['process/connection-fairness.test.js', 'floods a server from one address and bounds its RSS while others are served'],
  ['process/feed-viewers.test.js', 'holds 500 change-feed streams open at once'],
  ['process/http-limits.test.js', 'times how soon slow clients are cut off'],
  ['process/instance-bounds.test.js', "floods an instance with connections and bounds its memory"],
  ['process/pipelining.test.js', "floods a server with pipelined requests and bounds its RSS and /healthz's latency"],
  ['process/real-clients.test.js', 'opens a thousand connections at once from each of seven clients'],
  ['process/postgres-outage.test.js', 'times how soon requests are answered while PostgreSQL is down or frozen'],
  ['process/signals.test.js', 'times the shutdown after SIGTERM under load'],
  ['process/start-failure.test.js', 'times how soon a failed start exits'],
  ['process/tracing.test.js', 'bounds the latency of creates while the trace collector refuses or hangs'],
  ['process/write-queue-bound.test.js', "floods the write queue and bounds the server's RSS and latency"],
  ['http/webhook-dispatcher.test.js', 'races claims against 300 ms attempt time limits'],
  ['http/webhook-sender.test.js', 'holds that an interrupt cuts an attempt short within 50 ms'],
]);

/** Files at once in the shared run: the machine's cores (two on the development VM), at least two. */
const CONCURRENCY = 2;

function filesOf(tier: string): string[] {
  const dir = path.join(TESTS, tier);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.test.js'))
    .sort()
    .map((name) => `${tier}/${name}`);
}

/** Tiers whose files never use PostgreSQL: a run of only these starts no server. */
const WITHOUT_POSTGRES = ['unit/', 'browser/'];

/** Runs `node --test` over `files`; resolves with whether every test passed. */
function nodeTest(files: readonly string[], concurrency: number): Promise<boolean> {
  const args = ['--import', path.join(TESTS, 'helpers', 'exit-guard.js')];
  const needsPostgres = files.some((file) => !WITHOUT_POSTGRES.some((tier) => file.startsWith(tier)));
  // Node 22 has no --test-global-setup: each file then starts its own PostgreSQL when it needs one.
  if (needsPostgres && process.allowedNodeEnvironmentFlags.has('--test-global-setup')) {
    args.push(`--test-global-setup=${path.join(TESTS, 'helpers', 'global-postgres.js')}`);
  }
  args.push('--test', `--test-concurrency=${concurrency}`, ...files.map((file) => path.join(TESTS, file)));
  const child = spawn(process.execPath, args, { stdio: 'inherit' });
  // Ctrl-C reaches the runner and its files through the terminal; this process waits for them to finish.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
  return new Promise((resolve) => child.once('exit', (code) => resolve(code === 0)));
}

const asked = process.argv.slice(2);
for (const tier of asked) {
  if (!(TIERS as readonly string[]).includes(tier)) {
    process.stderr.write(`test/run: unknown tier ${JSON.stringify(tier)}; the tiers are ${TIERS.join(', ')}\n`);
    process.exit(2);
  }
}
const files = (asked.length > 0 ? asked : TIERS).flatMap(filesOf);
const shared = files.filter((file) => !ALONE.has(file));
const alone = files.filter((file) => ALONE.has(file));

const results: string[] = [];
let passed = true;
for (const [name, group, concurrency] of [
  ['shared', shared, CONCURRENCY],
  ['alone', alone, 1],
] as const) {
  if (group.length === 0) continue;
  process.stdout.write(`\n# test/run: ${name}: ${group.length} files, ${concurrency} at a time\n`);
  const began = performance.now();
  const ok = await nodeTest(group, concurrency);
  passed &&= ok;
  results.push(`${name}: ${group.length} files ${ok ? 'passed' : 'FAILED'} in ${Math.round((performance.now() - began) / 1000)} s`);
}
process.stdout.write(`\n# test/run: ${results.join('; ')}\n`);
process.exitCode = passed ? 0 : 1;
