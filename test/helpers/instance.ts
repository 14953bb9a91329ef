import { randomUUID } from 'node:crypto';
import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders } from 'node:http';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import type { Store } from '../../src/storage/store.js';
import { startServer, type RunningServer, type StartOptions } from '../../src/serve/server.js';
import type { WorkerPool } from '../../src/workers/worker-pool.js';
import { newToken } from './tokens.js';
import { waitFor } from './wait.js';

/** An instance of several threads, started (startServer with WORKERS > 1): its worker pool is always there. */
export interface RunningInstance extends RunningServer {
  readonly workers: WorkerPool;
}

/**
 * Starts an instance of config.workers threads (at least 2) as the entry does (startServer); resolves once every
 * thread listens. Tests only: the entry needs no type that says the pool is there.
 */
export async function startInstance(config: Config, options: StartOptions = {}): Promise<RunningInstance> {
  if (config.workers < 2) throw new Error('an instance has at least two threads (WORKERS >= 2)');
  const running = await startServer(config, options.open, options);
  const { workers } = running;
  if (workers === undefined) {
    await running.close();
    throw new Error('startServer started no worker threads with WORKERS >= 2');
  }
  return { ...running, workers };
}

export interface TestInstance {
  readonly instance: RunningInstance;
  readonly config: Config;
  /** e.g. http://127.0.0.1:41234, every worker's */
  readonly url: string;
  /** A valid token, and its name. */
  readonly token: string;
  readonly tokenName: string;
  /** A store of the test's own on the same database, as the CLI would open it. */
  readonly store: Store;
  /** The main thread's log lines so far, parsed (its workers log to stdout, at LOG_LEVEL: warn unless `env` says otherwise). */
  logs(): Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * An instance of worker threads (WORKERS=2 unless `env` says otherwise), in this process, on a free port, with one
 * token, and whatever `prepare` adds to the database first; the caller closes it.
 */
export async function startTestInstance(
  databaseUrl: string,
  env: Record<string, string> = {},
  options: StartOptions & { readonly prepare?: (store: Store) => Promise<void> } = {},
): Promise<TestInstance> {
  const config = loadConfig({ LOG_LEVEL: 'warn', WORKERS: '2', ...env, DATABASE_URL: databaseUrl, HOST: '127.0.0.1', PORT: '0' });
  const store = await openStore(config.database);
  const lines: string[] = [];
  const log = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    }),
  );
  try {
    const token = generateToken();
    const tokenName = `test-${randomUUID()}`;
    await store.tokens.add(newToken(tokenName, hashToken(token)));
    await options.prepare?.(store);
    const instance = await startInstance(config, { log, ...options });
    return {
      instance,
      config,
      url: instance.url,
      token,
      tokenName,
      store,
      logs: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
      close: async () => {
        try {
          await instance.close();
        } finally {
          await store.close();
        }
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

export interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/**
 * One request on a connection of its own (no keep-alive agent): the kernel hands each new connection to one of the
 * workers listening on the port, so many such requests reach every worker.
 */
export function freshRequest(url: string, options: { method?: string; path: string; token?: string; body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (options.token) headers['authorization'] = `Bearer ${options.token}`;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const sent = request(`${url}${options.path}`, { method: options.method ?? 'GET', headers, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    sent.on('error', reject);
    sent.setTimeout(30_000, () => sent.destroy(new Error(`no answer to ${options.method ?? 'GET'} ${options.path} within 30 s`)));
    sent.end(options.body);
  });
}

/** Which requests of http_request_duration_seconds to count: its labels, e.g. `{ method: 'DELETE', route: '/plants/{id}' }`. */
export type RequestLabels = Partial<Record<'method' | 'route' | 'status_code', string>>;

/**
 * Requests each worker has answered so far (those with `labels`, when given), by slot (0 the main thread): from each
 * worker's own metrics (http_request_duration_seconds).
 */
export async function requestsByWorker(instance: RunningInstance, labels: RequestLabels = {}): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  const threads = [{ slot: 0, metrics: (await instance.metrics?.snapshot()) ?? [] }, ...(await instance.workers.metrics())];
  const wanted = Object.entries(labels);
  for (const { slot, metrics } of threads) {
    const durations = metrics.find((metric) => metric.name === 'http_request_duration_seconds');
    const answered = (durations?.values ?? [])
      .filter((value) => (value as { metricName?: string }).metricName === 'http_request_duration_seconds_count')
      .filter((value) => wanted.every(([name, wantedValue]) => String((value.labels as Record<string, unknown>)[name]) === wantedValue))
      .reduce((sum, value) => sum + value.value, 0);
    counts.set(slot, answered);
  }
  return counts;
}

/**
 * Sends one request (`send`, on a connection of its own) and tells which thread answered it, by slot (0 the main
 * thread), from the one thread whose count of requests with `labels` went up by one. The caller sends nothing else
 * meanwhile. A thread counts a request as its answer is written, so the count may trail the answer a little: it is
 * waited for.
 */
export async function answeredBy(instance: RunningInstance, labels: RequestLabels, send: () => Promise<Answer>): Promise<{ slot: number; answer: Answer }> {
  const before = await requestsByWorker(instance, labels);
  const answer = await send();
  let risen: Array<[slot: number, by: number]> = [];
  await waitFor(
    `the answer (${answer.status}) to be counted by the thread that wrote it`,
    async () => {
      const after = await requestsByWorker(instance, labels);
      risen = [...after].map(([slot, count]): [number, number] => [slot, count - (before.get(slot) ?? 0)]).filter(([, by]) => by !== 0);
      return risen.length > 0;
    },
    { timeoutMs: 5_000 },
  );
  assert.equal(risen.length, 1, `one thread answered: ${JSON.stringify(risen)}`);
  const [[slot, by]] = risen as [[number, number]];
  assert.equal(by, 1, `thread ${slot} answered one request`);
  return { slot, answer };
}
