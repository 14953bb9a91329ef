/**
 * The servers under test, each a child process pinned to the server core: the ceiling, plantstore's HTTP layer alone
 * (app-only), and plantstore itself (`plantstore serve` in its default configuration, on the bench's store).
 */
import fs from 'node:fs';
import { CONFIG_VARIABLES } from '../src/config/variables.js';
import { createToken, startServer, type EnvOverrides, type ServerProcess } from '../test/helpers/process.js';
import type { Pinning } from './environment.js';
import { APP_ONLY, CEILING, CLI } from './layout.js';

export type ServerName = 'ceiling' | 'app-only' | 'baseline' | 'plantstore';

export interface BenchServer {
  readonly name: ServerName;
  readonly url: string;
  /** The server's own pid (taskset execs it), read in /proc. */
  readonly pid: number;
  readonly process: ServerProcess;
}

/** Slow starts are normal here: a prefilled store of millions of rows, or a busy machine. */
const START_TIMEOUT_MS = 60_000;
/** How long SIGTERM may take before SIGKILL. */
const STOP_TIMEOUT_MS = 20_000;

/**
 * plantstore's default configuration whatever the shell has: every variable src/config/config.ts reads is unset but the
 * database (so LOG_LEVEL is plantstore's default, info), and so are NODE_OPTIONS.
 */
export function plantstoreEnv(databaseUrl: string | undefined): EnvOverrides {
  const unset = Object.fromEntries([...CONFIG_VARIABLES, 'NODE_OPTIONS'].map((name) => [name, undefined]));
  return { ...unset, DATABASE_URL: databaseUrl };
}

function benchServer(name: ServerName, server: ServerProcess): BenchServer {
  return { name, url: server.base, pid: server.child.pid as number, process: server };
}

/** The ceiling, or (app-only) plantstore's HTTP layer on a store that keeps nothing: both take the token in BENCH_TOKEN. */
export async function startTokenServer(options: { readonly pinning: Pinning; readonly token: string; readonly name: 'ceiling' | 'app-only' }): Promise<BenchServer> {
  const server = await startServer(
    { ...plantstoreEnv(undefined), BENCH_TOKEN: options.token },
    {
      nodeArgs: [options.name === 'ceiling' ? CEILING : APP_ONLY],
      prefix: options.pinning.server,
      // Neither has a health route: any answer to GET /plants means it listens.
      readyPath: '/plants',
      readyOnAnyStatus: true,
      stdio: ['ignore', 'ignore', 'inherit'],
      startTimeoutMs: START_TIMEOUT_MS,
    },
  );
  return benchServer(options.name, server);
}

export interface PlantstoreStart {
  readonly pinning: Pinning;
  readonly databaseUrl: string;
  /** stdout and stderr are appended here: the report counts its lines. */
  readonly logFile: string;
  /** Write a V8 CPU profile (--cpu-prof) into this folder. */
  readonly cpuProfDir?: string | undefined;
  /** Another build's CLI (the baseline of an A/B). */
  readonly cli?: string;
  /** Set over the default configuration (the webhook scenario lets the dispatcher reach its local receiver; an A/B's settings). */
  readonly env?: EnvOverrides;
  readonly name?: 'plantstore' | 'baseline';
}

export async function startPlantstore(options: PlantstoreStart): Promise<BenchServer> {
  const log = fs.openSync(options.logFile, 'a');
  try {
    const server = await startServer({ ...plantstoreEnv(options.databaseUrl), ...options.env }, {
      nodeArgs: [...(options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : []), options.cli ?? CLI, 'serve'],
      prefix: options.pinning.server,
      stdio: ['ignore', log, log],
      startTimeoutMs: START_TIMEOUT_MS,
    });
    return benchServer(options.name ?? 'plantstore', server);
  } finally {
    fs.closeSync(log);
  }
}

/** SIGTERM (SIGKILL after a while); resolves with the exit code, null if it had to be killed. */
export async function stopServer(server: BenchServer): Promise<number | null> {
  return (await server.process.stop('SIGTERM', STOP_TIMEOUT_MS)).code;
}

/**
 * A token made with the real CLI, as an operator would: the CLI of the checkout being measured (--plantstore), which
 * also migrates an empty store to that checkout's schema, so an older build can be measured (or be the baseline).
 */
export function cliToken(databaseUrl: string, cli: string = CLI): string {
  return createToken('bench', plantstoreEnv(databaseUrl), cli);
}
