import { spawn, spawnSync } from 'node:child_process';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import type { Plant } from '../../src/plant.js';
import { CLI } from './process.js';

export interface CliResult {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `plantstore ARGS` to its end with `env` added, `input` on its standard input; never throws on a failure. */
export function plantstore(args: readonly string[], env: Record<string, string>, input?: string | Buffer): CliResult {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    input: input ?? '',
    timeout: 120_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  if (result.error) throw result.error;
  return { status: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr };
}

/** The same, without blocking the event loop: for running beside a server this process talks to. */
export function plantstoreAsync(args: readonly string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (status, signal) => resolve({ status, signal, stdout, stderr }));
  });
}

/** The file of a test database's `sqlite:/absolute/path` URL. */
export function sqliteFile(url: string): string {
  if (!url.startsWith('sqlite:/')) throw new Error(`not an absolute sqlite: URL: ${url}`);
  return url.slice('sqlite:'.length);
}

/** Stores `plants` directly through the store (fast, in batches), for tests that need many. */
export async function storePlants(url: string, plants: Iterable<Plant>): Promise<void> {
  const store = await openStore(loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent' }).database);
  try {
    let batch: Plant[] = [];
    for (const plant of plants) {
      batch.push(plant);
      if (batch.length === 5000) {
        await store.plants.create(batch);
        batch = [];
      }
    }
    if (batch.length > 0) await store.plants.create(batch);
  } finally {
    await store.close();
  }
}

export function* numberedPlants(count: number, first = 1n): Generator<Plant> {
  for (let index = 0n; index < BigInt(count); index += 1n) {
    const id = first + index;
    yield { id, name: `plant ${id}`, tag: index % 3n === 0n ? null : `tag${index % 5n}` };
  }
}

/** `POST /plants` with the token; the answer's status and body text. */
export async function postPlant(base: string, token: string, body: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`${base}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
  });
  return { status: response.status, body: await response.text() };
}

export interface Acknowledged {
  readonly id: bigint;
  /** Date.now() when the 200 was received. */
  readonly at: number;
}

/**
 * `clients` loops creating plants with distinct ids from `firstId` up against a running server, until stop(). Each
 * 200 is recorded with the time it arrived; any other status is kept to be asserted on, as is the slowest answer.
 */
export function keepWriting(base: string, token: string, clients: number, firstId: bigint) {
  const acknowledged: Acknowledged[] = [];
  const refused: Array<{ status: number; body: string }> = [];
  let slowestMs = 0;
  let next = firstId;
  let stopping = false;
  const loops = Array.from({ length: clients }, async () => {
    while (!stopping) {
      const id = next;
      next += 1n;
      const started = performance.now();
      const answer = await postPlant(base, token, `{"id":${id},"name":"written while copying ${id}"}`);
      slowestMs = Math.max(slowestMs, performance.now() - started);
      if (answer.status === 200) acknowledged.push({ id, at: Date.now() });
      else refused.push(answer);
    }
  });
  return {
    acknowledged,
    refused,
    slowestMs: () => slowestMs,
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(loops);
    },
  };
}
