import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The compiled CLI, dist/src/cli.js, next to this file's dist/test/helpers. */
export const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli.js');

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Runs a CLI command to completion; throws with its stderr when it fails. */
export function runCli(args: string[], env: Record<string, string>): { stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (result.status !== 0) throw new Error(`plantstore ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return { stdout: result.stdout, stderr: result.stderr };
}

/** `plantstore token create --name NAME` on the database in `env`; its stdout is the token alone. */
export function createToken(name: string, env: Record<string, string>): string {
  const token = runCli(['token', 'create', '--name', name], env).stdout.trim();
  if (!/^\S+$/.test(token)) throw new Error(`token create printed ${JSON.stringify(token)}`);
  return token;
}

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly port: number;
  /** e.g. http://127.0.0.1:41234 */
  readonly base: string;
  output(): { stdout: string; stderr: string };
  /** Sends the signal and resolves with the exit code (null when killed by a signal) and the signal. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL unless it has exited already; for after hooks. */
  kill(): Promise<void>;
  exited(): boolean;
}

/** `plantstore serve` as a child process on a free port; resolves once /healthz answers 200. */
export async function startServer(env: Record<string, string>, startTimeoutMs = 30_000): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'serve'], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, HOST: '127.0.0.1', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    // Keep the tail only: a long test must not hold every log line.
    stdout = (stdout + chunk.toString()).slice(-200_000);
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-200_000);
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server exited before answering (code ${child.exitCode}): ${stderr}`);
    }
    try {
      const response = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`server did not answer /healthz within ${startTimeoutMs} ms: ${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  return {
    child,
    port,
    base,
    output: () => ({ stdout, stderr }),
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 30_000) {
      if (!exited()) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      try {
        return await exit;
      } finally {
        clearTimeout(timer);
      }
    },
    async kill() {
      if (!exited()) child.kill('SIGKILL');
      await exit;
    },
  };
}
