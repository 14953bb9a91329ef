/**
 * Smoke run of the benchmark script itself (`--quick`: one pair of 1 s runs). It checks that the script works
 * end to end and that plantstore answered every request with a 2xx; it asserts nothing about speed.
 */
import './helpers/exit-guard.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface BenchJson {
  summary: { plantstoreNon2xx: number; plantstoreErrors: number; plantstoreOk: number; everyOkStored: boolean };
  runs: Array<{ server: string; load: { ok: number; non2xx: number; errors: number; timeouts: number; responses: number } }>;
}

test('npm run bench -- --quick completes, prints the table, and plantstore answered every request 2xx', { timeout: 180_000 }, async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-smoke-'));
  try {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/bench/bench.js'), '--quick', '--out', out], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.equal(code, 0, `bench exited with ${code}\n${stderr}`);

    assert.match(stdout, /\| pair \| server \| req\/s \| p50 ms \| p99 ms \| max ms \|/);
    assert.match(stdout, /\| 1 \| ceiling \|/);
    assert.match(stdout, /\| 1 \| plantstore \|/);
    assert.match(stdout, /Load generator: (autocannon|wrk)/, "the output names the load generator");

    const jsonPath = /^results: (.+\.json)$/m.exec(stdout)?.[1];
    assert.ok(jsonPath, 'the results file is named');
    assert.ok(fs.existsSync(jsonPath.replace(/\.json$/, '.md')), 'the markdown table is written');
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
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});

test('npm run bench -- --webhook --quick completes, and every event of an acknowledged create reached the local receiver', { timeout: 240_000 }, async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-bench-smoke-'));
  try {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/bench/bench.js'), '--webhook', '--quick', '--out', out], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.equal(code, 0, `bench exited with ${code}\n${stderr}`);
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
