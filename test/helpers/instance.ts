import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import type { Store } from '../../src/storage/store.js';
import type { StartOptions } from '../../src/serve/server.js';
import { startInstance, type RunningInstance } from '../../src/workers/instance.js';
import { newToken } from './tokens.js';

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
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    sent.on('error', reject);
    sent.setTimeout(30_000, () => sent.destroy(new Error(`no answer to ${options.method ?? 'GET'} ${options.path} within 30 s`)));
    sent.end(options.body);
  });
}

/** Requests each worker has answered so far, by slot: from each worker's own metrics (http_request_duration_seconds). */
export async function requestsByWorker(instance: RunningInstance): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  const threads = [{ slot: 0, metrics: (await instance.metrics?.snapshot()) ?? [] }, ...(await instance.workers.metrics())];
  for (const { slot, metrics } of threads) {
    const durations = metrics.find((metric) => metric.name === 'http_request_duration_seconds');
    const answered = (durations?.values ?? [])
      .filter((value) => (value as { metricName?: string }).metricName === 'http_request_duration_seconds_count')
      .reduce((sum, value) => sum + value.value, 0);
    counts.set(slot, answered);
  }
  return counts;
}
