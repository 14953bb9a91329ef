/**
 * A `plantstore serve` started through a launcher (npm start, npx, the installed command) as a real process, and the
 * check that a signal to the launcher's PID stops it exactly as SIGTERM to the server does: requests in flight
 * answered, exit 0, the port free, and no process of the launcher's tree left.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { halfSentCreate } from './half-sent-create.js';
import { waitFor } from './wait.js';

/** process.env without what npm puts there for a script (npm test), which would point npm back at this checkout. */
export function withoutNpmVariables(env: NodeJS.ProcessEnv): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && !/^npm_/i.test(name)) kept[name] = value;
  }
  return kept;
}

export interface Launched {
  readonly child: ChildProcess;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/**
 * Starts `command` in its own process group (as a shell's job is), its stdout and stderr kept for messages; `cwd`
 * and `env` as given. The caller waits for readiness.
 */
export function launch(command: string, args: readonly string[], options: { cwd: string; env: Record<string, string> }): Launched {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-100_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exit = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  return { child, exit, output: () => output };
}

/** Ends whatever is left of a launched process group (after a failed test); nothing if it is gone. */
export function killGroup(launched: Launched): void {
  try {
    process.kill(-(launched.child.pid as number), 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Every process below `pid`, found through /proc's parent links. */
export function descendantsOf(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The parent pid is the 2nd field after the parenthesised command name, which may itself hold spaces.
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // The process ended while it was read.
    }
  }
  const found: number[] = [];
  const walk = (parent: number) => {
    for (const [child, itsParent] of parents) {
      if (itsParent === parent) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  try {
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    return true;
  } catch {
    return false;
  } finally {
    server.close();
  }
}

/** Polls GET /healthz until it answers 200, failing with the launcher's output if it exits first. */
export async function waitUntilServing(launched: Launched, port: number, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `a server on port ${port}`,
    async () => {
      if (launched.child.exitCode !== null || launched.child.signalCode !== null) {
        throw new Error(`the launcher exited before serving: ${launched.output()}`);
      }
      try {
        const response = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
        await response.arrayBuffer();
        return response.ok;
      } catch {
        return false;
      }
    },
    { timeoutMs, intervalMs: 100 },
  );
}

/** How long a launcher may take to exit after the signal: the server's shutdown of a few idle connections, and npm's own exit. */
const EXIT_WITHIN_MS = 30_000;

export interface StopCheck {
  readonly launched: Launched;
  readonly port: number;
  readonly token: string;
  readonly signal: NodeJS.Signals;
  /** To the launcher's whole process group, as Ctrl-C in a terminal sends it; else to the launcher's PID alone. */
  readonly toGroup?: boolean;
  /** Ids for the in-flight creates, unused so far in the database. */
  readonly ids: readonly number[];
}

/**
 * Sends the signal with creates in flight and checks the server stopped as SIGTERM stops it: each in-flight create
 * answered 200, the launcher exits 0 (not by a signal), every process of its tree gone, the port free.
 */
export async function assertStopsCleanly(check: StopCheck): Promise<void> {
  const { launched, port, token, signal } = check;
  const pid = launched.child.pid as number;
  const tree = [pid, ...descendantsOf(pid)];
  const inFlight = await Promise.all(check.ids.map((id) => halfSentCreate(port, token, JSON.stringify({ id, name: `in flight ${id}` }))));
  if (check.toGroup) process.kill(-pid, signal);
  else process.kill(pid, signal);
  // The listener closes at once; the in-flight requests are finished after the signal.
  await sleep(300);
  for (const [index, request] of inFlight.entries()) {
    assert.equal((await request.finish()).status, 200, `in-flight create ${check.ids[index]} answered after ${signal}; output: ${launched.output()}`);
  }
  // A launcher that swallows the signal never exits: that is a failure, not a test left waiting.
  const exit = await Promise.race([launched.exit, sleep(EXIT_WITHIN_MS).then(() => 'still running' as const)]);
  assert.deepEqual(exit, { code: 0, signal: null }, `the launcher's exit after ${signal}; output: ${launched.output()}`);
  await waitFor(`the launcher's processes (${tree.join(', ')}) to be gone`, () => tree.every((member) => !alive(member)), { timeoutMs: 5000 });
  assert.ok(await portIsFree(port), `port ${port} is free`);
  assert.match(launched.output(), new RegExp(`"signal":"${signal}","msg":"shutting down`), 'the server itself got the signal');
  assert.match(launched.output(), /"msg":"shut down cleanly"/);
}
