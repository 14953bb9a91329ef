/**
 * Smoke run of the benchmark script itself (`--quick`: one pair of 1 s runs). It checks that the script works
 * end to end and that plantstore answered every request with a 2xx; it asserts nothing about speed.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface BenchJson {
  summary: {
    plantstoreNon2xx: number;
    plantstoreErrors: number;
    plantstoreOk: number;
    everyOkStored: boolean;
    plantstoreOverBaseline: number | null;
    plantstoreOverAppOnly: number | null;
  };
  runs: Array<{ server: string; load: { ok: number; non2xx: number; errors: number; timeouts: number; responses: number } }>;
}

/** Runs the bench program as `npm run bench -- ARGS` would; resolves with its stdout once it exited 0. */
async function runBench(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/bench/bench.js'), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, `bench exited with ${code}\n${stderr}`);
  return stdout;
}

test('npm run bench -- --quick (with an app-only server and an A/B baseline) completes, prints the table and its chart, and plantstore answered every request 2xx', { timeout: 180_000 }, async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-smoke-'));
  try {
    // The baseline is this checkout with a setting changed: the A/B path of the bench, end to end.
    const args = ['--quick', '--app-only', '--baseline-env', 'LOG_LEVEL=warn', '--out', out];
    const stdout = await runBench(args);

    assert.match(stdout, /\| pair \| server \| req\/s \| p50 ms \| p99 ms \| max ms \|/);
    assert.match(stdout, /\| 1 \| ceiling \|/);
    assert.match(stdout, /\| 1 \| plantstore \|/);
    assert.match(stdout, /\| 1 \| app-only \|/);
    assert.match(stdout, /\| 1 \| baseline \|/);
    assert.match(stdout, /plantstore ÷ baseline, per pair: \d/);
    assert.match(stdout, /durable ÷ app-only, per pair: \d/);
    assert.match(stdout, /Load generator: (autocannon|wrk)/, "the output names the load generator");

    const jsonPath = /^results: (.+\.json)$/m.exec(stdout)?.[1];
    assert.ok(jsonPath, 'the results file is named');
    assert.ok(fs.existsSync(jsonPath.replace(/\.json$/, '.md')), 'the markdown table is written');
    const chartPath = /^chart: (.+\.svg)$/m.exec(stdout)?.[1];
    assert.equal(chartPath, jsonPath.replace(/\.json$/, '.svg'), 'the chart is written next to the JSON');
    const svg = fs.readFileSync(chartPath, 'utf8');
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    for (const server of ['ceiling', 'app-only', 'baseline', 'plantstore']) assert.match(svg, new RegExp(`<title>pair 1 ${server}: \\d+ req/s</title>`));
    const result = JSON.parse(fs.readFileSync(jsonPath, 'utf8')) as BenchJson;
    const plantstore = result.runs.filter((run) => run.server === 'plantstore');
    assert.equal(plantstore.length, 1);
    for (const run of plantstore) {
      assert.ok(run.load.ok > 0, 'plantstore answered requests');
      assert.equal(run.load.non2xx, 0, 'every plantstore answer is a 2xx');
      assert.equal(run.load.errors + run.load.timeouts, 0, 'no connection errors or timeouts');
      assert.equal(run.load.responses, run.load.ok);
    }
    assert.equal(result.summary.plantstoreNon2xx, 0, 'warm-up included');
    assert.equal(result.summary.plantstoreErrors, 0);
    assert.ok(result.summary.everyOkStored, 'every 2xx is in the store');
    assert.equal(typeof result.summary.plantstoreOverBaseline, 'number');
    assert.equal(typeof result.summary.plantstoreOverAppOnly, 'number');
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});

test('npm run bench -- --webhook --quick completes, and every event of an acknowledged create reached the local receiver', { timeout: 240_000 }, async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-smoke-'));
  try {
    const stdout = await runBench(['--webhook', '--quick', '--out', out]);
    assert.match(stdout, /\| 1 \| no subscription \|/);
    assert.match(stdout, /\| 1 \| webhook \|/);
    const jsonPath = /^results: (.+\.json)$/m.exec(stdout)?.[1];
    assert.ok(jsonPath, 'the results file is named');
    const result = JSON.parse(fs.readFileSync(jsonPath, 'utf8')) as { summary: { medianRatio: number | null; everyAcknowledgedEventReceived: boolean; webhookAcknowledged: number } };
    assert.ok(result.summary.webhookAcknowledged > 0);
    assert.ok(result.summary.everyAcknowledgedEventReceived, 'the outbox drained and every event arrived');
    assert.equal(typeof result.summary.medianRatio, 'number');
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});

test('npm run bench -- --workers 2 --quick completes: creates, reads by id and the 90/10 mix, each with WORKERS=1 and WORKERS=2 in one pair, every answer 2xx and every create stored, ratios, the main thread\'s CPU and the machine\'s ceiling reported', { timeout: 300_000 }, async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-smoke-'));
  try {
    const stdout = await runBench(['--workers', '2', '--quick', '--out', out]);
    assert.match(stdout, /\| workload \| pair \| WORKERS \| req\/s \|/);
    for (const workload of ['creates', 'reads', 'mixed']) {
      assert.match(stdout, new RegExp(`\\| ${workload} \\| 1 \\| 1 \\| \\d+ \\|`));
      assert.match(stdout, new RegExp(`\\| ${workload} \\| 1 \\| 2 \\| \\d+ \\|`));
    }
    assert.match(stdout, /Pinning: none \(--workers\)/);
    const jsonPath = /^results: (.+\.json)$/m.exec(stdout)?.[1];
    assert.ok(jsonPath, 'the results file is named');
    const result = JSON.parse(fs.readFileSync(jsonPath, 'utf8')) as {
      summary: {
        workloads: Array<{ workload: string; reqPerSecRatio: number | null; cpuPerRequestRatio: number | null; machineCeilingRatio: number | null }>;
        non2xx: number;
        errors: number;
        createsOk: number;
        everyOkStored: boolean;
        exitCodes: number[];
      };
      runs: Array<{ workload: string; workers: number; mainThreadCpuMicrosPerRequest: number; machineBusyShare: number; machineCpuMicrosPerRequest: number; serverCpuMicrosPerRequest: number; load: { ok: number } }>;
    };
    assert.deepEqual(
      result.runs.map((run) => `${run.workload} ${run.workers}`),
      ['creates 1', 'creates 2', 'reads 1', 'reads 2', 'mixed 1', 'mixed 2'],
    );
    for (const run of result.runs) {
      assert.ok(run.load.ok > 0, `${run.workload} WORKERS=${run.workers} answered requests`);
      assert.ok(run.mainThreadCpuMicrosPerRequest > 0, 'the main thread\'s CPU is read from /proc');
      assert.ok(run.machineBusyShare > 0 && run.machineBusyShare <= 1, `the machine's busy share is read from /proc/stat: ${run.machineBusyShare}`);
      // Every core's busy time includes the server's own.
      assert.ok(run.machineCpuMicrosPerRequest >= run.serverCpuMicrosPerRequest * 0.9, `machine ${run.machineCpuMicrosPerRequest} µs/req, server ${run.serverCpuMicrosPerRequest}`);
    }
    for (const workload of result.summary.workloads) {
      assert.equal(typeof workload.reqPerSecRatio, 'number', `${workload.workload}: req/s ratio`);
      assert.equal(typeof workload.cpuPerRequestRatio, 'number', `${workload.workload}: CPU ratio`);
      assert.equal(typeof workload.machineCeilingRatio, 'number', `${workload.workload}: the machine's ceiling`);
    }
    assert.deepEqual([result.summary.non2xx, result.summary.errors], [0, 0]);
    assert.ok(result.summary.createsOk > 0 && result.summary.everyOkStored, 'every create answered 2xx is in the store');
    assert.deepEqual(result.summary.exitCodes, [0, 0, 0, 0, 0, 0], 'every server shut down cleanly');
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});
