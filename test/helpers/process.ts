import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import { once } from 'node:events';
import { request as httpsRequest } from 'node:https';
import { connect, createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The compiled CLI, dist/src/cli/plantstore.js (the package's `bin`), beside this file's dist/test/helpers. */
export const CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'plantstore.js');

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A child's environment: process.env with `env` over it. A variable given as undefined is left out of the child's
 * environment altogether (Node's spawn skips undefined values), so callers can also unset what the shell has.
 */
export type EnvOverrides = Readonly<Record<string, string | undefined>>;

/** Runs a CLI command to completion; throws with its stderr when it fails. */
export function runCli(args: string[], env: EnvOverrides, cli: string = CLI): { stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [cli, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (result.status !== 0) throw new Error(`plantstore ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return { stdout: result.stdout, stderr: result.stderr };
}

/** `plantstore token create --name NAME` (then `options`, e.g. --read-only) on the database in `env`; its stdout is the token alone. */
export function createToken(name: string, env: EnvOverrides, cli: string = CLI, options: readonly string[] = []): string {
  const token = runCli(['token', 'create', '--name', name, ...options], env, cli).stdout.trim();
  if (!/^\S+$/.test(token)) throw new Error(`token create printed ${JSON.stringify(token)}`);
  return token;
}

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly port: number;
  /** e.g. http://127.0.0.1:41234 */
  readonly base: string;
  /** The tails of stdout and stderr; empty when `stdio` sent them elsewhere. */
  output(): { stdout: string; stderr: string };
  /** Sends the signal and resolves with the exit code (null when killed by a signal) and the signal. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL unless it has exited already; for after hooks. */
  kill(): Promise<void>;
  exited(): boolean;
}

/** What startServer runs and how; the defaults are what the tests want: `plantstore serve`, ready on /healthz 200. */
export interface StartServerOptions {
  /** Node's arguments: any Node flags, then the script and its arguments. Default: the CLI's `serve`. */
  readonly nodeArgs?: readonly string[];
  /**
   * A command node runs under, e.g. `['taskset', '-c', '0']`. It must exec node, so that the child's pid is the
   * server's own (the bench reads /proc/<pid>).
   */
  readonly prefix?: readonly string[];
  /** Polled until the server answers it (default `/healthz`). */
  readonly readyPath?: string;
  /** Any HTTP answer means ready, not only a 2xx: for servers that have no health route. */
  readonly readyOnAnyStatus?: boolean;
  /** Passed to spawn. Default: stdout and stderr piped and their tails kept for output(). */
  readonly stdio?: StdioOptions;
  readonly startTimeoutMs?: number;
  /** HOST; default 127.0.0.1. The server is probed on 127.0.0.1 whatever it listens on. */
  readonly host?: string;
  /** The server serves HTTPS with a certificate this CA (PEM) vouches for: `base` is https:// and it is probed so. */
  readonly ca?: Buffer;
  /** PORT; default a free one. A restart on the port of a stopped server keeps its clients' URL. */
  readonly port?: number;
}

/** GET over HTTPS trusting `ca` alone: the status, once the answer has been read. */
function httpsGet(url: string, ca: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = httpsRequest(url, { ca, agent: false, timeout: 2000 }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`no answer from ${url} within 2 s`)));
    request.on('error', reject);
    request.end();
  });
}

/**
 * A server as a child process on a free port (given in PORT, with HOST 127.0.0.1 unless `options.host` says
 * otherwise; LOG_LEVEL is warn unless `env` does); resolves once it answers, and kills it if it does not within the
 * start timeout.
 */
export async function startServer(env: EnvOverrides, options: StartServerOptions = {}): Promise<ServerProcess> {
  const { nodeArgs = [CLI, 'serve'], prefix = [], readyPath = '/healthz', readyOnAnyStatus = false, startTimeoutMs = 30_000, host = '127.0.0.1', ca } = options;
  const port = options.port ?? (await freePort());
  const argv = [...prefix, process.execPath, ...nodeArgs];
  const child = spawn(argv[0] as string, argv.slice(1), {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, HOST: host, PORT: String(port) },
    stdio: options.stdio ?? ['ignore', 'pipe', 'pipe'],
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
  const base = `${ca ? 'https' : 'http'}://127.0.0.1:${port}`;
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server exited before answering (code ${child.exitCode}): ${stderr}`);
    }
    try {
      let status: number;
      if (ca) status = await httpsGet(`${base}${readyPath}`, ca);
      else {
        const response = await fetch(`${base}${readyPath}`, { signal: AbortSignal.timeout(2000) });
        await response.arrayBuffer();
        status = response.status;
      }
      if ((status >= 200 && status < 300) || readyOnAnyStatus) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`server did not answer ${readyPath} within ${startTimeoutMs} ms: ${stderr}`);
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

export interface RawResponse {
  readonly status: number;
  /** Header names in lower case. */
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Milliseconds from connecting to the answer (or to the close). */
  readonly elapsedMs: number;
  /** The server closed the connection without any answer. */
  readonly closedWithoutAnswer: boolean;
}

/** The first complete final (non-1xx) response in `data`, if any. */
export function parseResponse(data: Buffer): Omit<RawResponse, 'elapsedMs' | 'closedWithoutAnswer'> | undefined {
  let offset = 0;
  for (;;) {
    const end = data.indexOf('\r\n\r\n', offset);
    if (end === -1) return undefined;
    const head = data.subarray(offset, end).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '')?.[1]);
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    if (status >= 100 && status < 200) {
      offset = end + 4;
      continue;
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyStart = end + 4;
    if (data.length < bodyStart + length) return undefined;
    return { status, headers, body: data.subarray(bodyStart, bodyStart + length).toString('utf8') };
  }
}

export interface RawRequestOptions {
  /** Sent one after another; a number between parts waits that many milliseconds. */
  readonly parts: ReadonlyArray<string | Buffer | number>;
  /** Give up (and fail) after this long. */
  readonly timeoutMs?: number;
  /** Half-close the socket after the last part (Node's server then drops a request it is still reading). */
  readonly end?: boolean;
}

/**
 * Writes raw bytes to a server and resolves with its first complete answer, or with what it had when the server
 * closed the connection. For what an HTTP client library cannot express: wrong Content-Length, slow headers.
 */
export function rawRequest(port: number, options: RawRequestOptions): Promise<RawResponse> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      const parsed = parseResponse(data);
      if (!parsed && !closed) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(
        parsed
          ? { ...parsed, elapsedMs: Date.now() - started, closedWithoutAnswer: false }
          : { status: 0, headers: {}, body: data.toString('utf8'), elapsedMs: Date.now() - started, closedWithoutAnswer: true },
      );
    };
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(new Error(`no answer within ${options.timeoutMs ?? 30_000} ms; received ${JSON.stringify(data.toString('latin1').slice(0, 300))}`));
    }, options.timeoutMs ?? 30_000);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      finish(false);
    });
    socket.on('close', () => finish(true));
    socket.on('error', () => undefined);
    socket.once('connect', async () => {
      for (const part of options.parts) {
        if (settled || socket.destroyed) return;
        if (typeof part === 'number') await new Promise((resolve) => setTimeout(resolve, part));
        else socket.write(part);
      }
      if (options.end) socket.end();
    });
  });
}

/** An Error record answer: `{error, message}` only, error equal to the status, JSON content type. */
export function errorRecordProblem(status: number, contentType: string | undefined, body: string): string | undefined {
  if (!/^application\/json\b/.test(contentType ?? '')) return `Content-Type is ${JSON.stringify(contentType)}`;
  let record: unknown;
  try {
    record = JSON.parse(body);
  } catch {
    return `body is not JSON: ${JSON.stringify(body.slice(0, 200))}`;
  }
  if (record === null || typeof record !== 'object' || Array.isArray(record)) return `body is not an object: ${body.slice(0, 200)}`;
  const keys = Object.keys(record).sort().join(',');
  if (keys !== 'error,message') return `body has keys ${keys}: ${body.slice(0, 200)}`;
  const { error, message } = record as { error: unknown; message: unknown };
  if (error !== status) return `error ${String(error)} is not the status ${status}`;
  if (!Number.isInteger(error) || (error as number) > 2 ** 31 - 1) return 'error is not an int32';
  if (typeof message !== 'string' || message.length === 0) return 'message is not a non-empty string';
  return undefined;
}
