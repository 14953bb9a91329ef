/**
 * The HTTP clients people use, each run in a process of its own against a server, sending creates from one address
 * (test/process/real-clients.test.ts counts their answers, bench/clients.ts times them): Node's fetch and an undici
 * Pool, Python's aiohttp and requests, Go's net/http default client, ab -k and curl --parallel. Each reports a
 * ClientSummary.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClientSummary, Outcome } from './client-summary.js';
import { summarize } from './client-summary.js';
import { apacheBench, curl, goToolchain, located, pythonWithHttpClients, type Prerequisite } from './prerequisites.js';

export type ClientKind = 'fetch' | 'undici Pool' | 'aiohttp' | 'requests' | 'Go net/http' | 'ab -k' | 'curl --parallel';

export const CLIENT_KINDS: readonly ClientKind[] = ['fetch', 'undici Pool', 'aiohttp', 'requests', 'Go net/http', 'ab -k', 'curl --parallel'];

/** What each client needs beyond Node. */
export function prerequisitesOf(kind: ClientKind): Prerequisite[] {
  if (kind === 'aiohttp' || kind === 'requests') return [pythonWithHttpClients()];
  if (kind === 'Go net/http') return [goToolchain()];
  if (kind === 'ab -k') return [apacheBench()];
  if (kind === 'curl --parallel') return [curl()];
  return [];
}

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** test/clients in the source tree (the Python and Go programs are not compiled to dist/). */
const SOURCES = path.resolve(HERE, '../../../test/clients');
const NODE_CLIENT = path.resolve(HERE, '../clients/node-creates.js');

export interface ClientRun {
  readonly base: string;
  readonly token: string;
  readonly concurrency: number;
  readonly total: number;
  readonly firstId: bigint;
  /** Where its connections come from (fetch and undici Pool only); default the kernel's choice, 127.0.0.1. */
  readonly localAddress?: string;
}

/**
 * A directory for what the clients build and write (the Go binary, its build cache, request files); `cleanup()`
 * removes it. Go's cache goes here unless GOCACHE is set: a fresh CI machine may have no usable HOME.
 */
export class ClientWorkspace {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-clients-'));
  #goBinary: Promise<string> | undefined;

  cleanup(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs one client to completion and reads its summary. */
  async run(kind: ClientKind, run: ClientRun): Promise<ClientSummary> {
    const args = [run.base, run.token, String(run.concurrency), String(run.total), String(run.firstId)];
    const from = run.localAddress ? [run.localAddress] : [];
    switch (kind) {
      case 'fetch':
        return parseSummary(await execute(process.execPath, [NODE_CLIENT, 'fetch', ...args, ...from]));
      case 'undici Pool':
        return parseSummary(await execute(process.execPath, [NODE_CLIENT, 'pool', ...args, ...from]));
      case 'aiohttp':
      case 'requests':
        return parseSummary(await execute(located(pythonWithHttpClients()), [path.join(SOURCES, 'creates.py'), kind, ...args]));
      case 'Go net/http':
        return parseSummary(await execute(await this.#go(), args));
      case 'ab -k':
        return this.#ab(run);
      case 'curl --parallel':
        return this.#curl(run);
    }
  }

  #go(): Promise<string> {
    this.#goBinary ??= (async () => {
      const binary = path.join(this.dir, 'creates');
      const env = { ...process.env, GOCACHE: process.env.GOCACHE ?? path.join(this.dir, 'gocache'), GOPATH: process.env.GOPATH ?? path.join(this.dir, 'gopath'), GOTOOLCHAIN: 'local', GOFLAGS: '' };
      await execute(located(goToolchain()), ['build', '-o', binary, path.join(SOURCES, 'go', 'main.go')], env);
      return binary;
    })();
    return this.#goBinary;
  }

  /** ab sends one body over and over: one plant, created once and then answered 200 as the same create again. */
  async #ab(run: ClientRun): Promise<ClientSummary> {
    const bodyFile = path.join(this.dir, `ab-${run.firstId}.json`);
    fs.writeFileSync(bodyFile, `{"id":${run.firstId},"name":"client ${run.firstId}"}`);
    const started = performance.now();
    const output = await execute(
      located(apacheBench()),
      ['-k', '-q', '-c', String(run.concurrency), '-n', String(run.total), '-s', '60', '-p', bodyFile, '-T', 'application/json', '-H', `Authorization: Bearer ${run.token}`, `${run.base}/plants`],
      process.env,
      true,
    );
    const elapsedMs = performance.now() - started;
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+([0-9.]+)`, 'm').exec(output)?.[1] ?? Number.NaN);
    const percentile = (p: number) => Number(new RegExp(`^\\s+${p}%\\s+([0-9]+)`, 'm').exec(output)?.[1] ?? Number.NaN);
    const complete = field('Complete requests');
    const failed = field('Failed requests');
    const non2xx = Number(/^Non-2xx responses:\s+([0-9]+)/m.exec(output)?.[1] ?? 0);
    const sent = Number.isNaN(complete) ? 0 : complete;
    const errors: Record<string, number> = {};
    if (failed > 0) errors.failed = failed;
    if (sent < run.total) errors[/^apr_\w+: .*$/m.exec(output)?.[0] ?? 'ab stopped early'] = run.total - sent;
    return {
      sent: run.total,
      ok: sent - failed - non2xx,
      statuses: non2xx > 0 ? { 'non-2xx': non2xx } : {},
      errors,
      elapsedMs: Number.isNaN(field('Time taken for tests')) ? elapsedMs : field('Time taken for tests') * 1000,
      p50Ms: percentile(50),
      p99Ms: percentile(99),
      maxMs: percentile(100),
    };
  }

  /** curl --parallel reads its transfers from a config file, each with its own body; it caps parallelism at 300. */
  async #curl(run: ClientRun): Promise<ClientSummary> {
    const config = path.join(this.dir, `curl-${run.firstId}.conf`);
    const lines: string[] = [];
    for (let index = 0; index < run.total; index += 1) {
      const id = run.firstId + BigInt(index);
      lines.push(
        `url = "${run.base}/plants"`,
        'request = "POST"',
        `header = "Authorization: Bearer ${run.token}"`,
        'header = "Content-Type: application/json"',
        `data = "{\\"id\\":${id},\\"name\\":\\"client ${id}\\"}"`,
        'output = "/dev/null"',
        'write-out = "%{http_code} %{time_total}\\n"',
      );
      if (index + 1 < run.total) lines.push('next');
    }
    fs.writeFileSync(config, `${lines.join('\n')}\n`);
    const started = performance.now();
    const output = await execute(located(curl()), ['--silent', '--no-progress-meter', '--parallel', '--parallel-immediate', '--parallel-max', String(run.concurrency), '--max-time', '60', '--config', config], process.env, true);
    const elapsedMs = performance.now() - started;
    const outcomes: Outcome[] = [];
    for (const line of output.split('\n')) {
      const match = /^([0-9]{3}) ([0-9.]+)$/.exec(line.trim());
      if (!match) continue;
      const [, code = '', seconds = '0'] = match;
      const ms = Number(seconds) * 1000;
      outcomes.push(code === '000' ? { error: 'no answer', ms } : { status: Number(code), ms });
    }
    for (let missing = outcomes.length; missing < run.total; missing += 1) outcomes.push({ error: 'not reported', ms: 0 });
    return summarize(outcomes, elapsedMs);
  }
}

function parseSummary(output: string): ClientSummary {
  const line = output.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(line) as ClientSummary;
  } catch {
    throw new Error(`the client printed no summary: ${output.slice(-2000)}`);
  }
}

/** Runs a command to its end; its stdout (with stderr after it when `anyExit`, which also accepts any exit status). */
function execute(command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env, anyExit = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-20_000)));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0 || anyExit) resolve(anyExit ? `${stdout}\n${stderr}` : stdout);
      else reject(new Error(`${path.basename(command)} ${args.slice(0, 3).join(' ')} exited ${code}: ${stderr}`));
    });
  });
}
