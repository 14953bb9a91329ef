import { PlantConflictError, PlantStoreError } from './errors.js';

/** How many times, and how long at most, a retryable request is tried again. */
export interface RetryOptions {
  /** Attempts in all, the first included. */
  readonly attempts?: number;
  /** The longest wait between two attempts, and the longest Retry-After honoured; a longer one ends the retries. */
  readonly maxDelayMs?: number;
  /** The first wait after a network error without Retry-After, doubled after each. */
  readonly baseDelayMs?: number;
}

export interface ClientOptions {
  /** The server's base URL, e.g. http://127.0.0.1:8080 (a path prefix is kept). */
  readonly url: string | URL;
  /** A bearer token with the scopes the calls need (plants:read, plants:create, plants:delete). */
  readonly token?: string;
  readonly retry?: RetryOptions;
  /** The fetch to use: the platform's by default. */
  readonly fetch?: typeof fetch;
}

export interface Transport {
  readonly base: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly fetch: typeof fetch;
  readonly attempts: number;
  readonly maxDelayMs: number;
  readonly baseDelayMs: number;
}

export function transport(options: ClientOptions): Transport {
  const base = new URL(options.url);
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  const fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  return {
    base,
    headers: options.token === undefined ? {} : { authorization: `Bearer ${options.token}` },
    fetch: fetcher,
    attempts: Math.max(1, options.retry?.attempts ?? 4),
    maxDelayMs: options.retry?.maxDelayMs ?? 30_000,
    baseDelayMs: options.retry?.baseDelayMs ?? 250,
  };
}

/** A path of the API (no leading slash) against the base URL. */
export function endpoint(t: Transport, path: string): URL {
  return new URL(path, t.base);
}

/** Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterSeconds(headers: Headers, now = Date.now()): number | undefined {
  const value = headers.get('retry-after')?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** The error an answer that is not a success stands for, from its Error record when it is one. */
export async function answerError(response: Response): Promise<PlantStoreError> {
  const text = await response.text().catch(() => '');
  let error: number | undefined;
  let message = text === '' ? `the server answered ${response.status}` : text;
  try {
    const record = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (typeof record.error === 'number' && typeof record.message === 'string') {
      error = record.error;
      message = record.message;
    }
  } catch {
    // Not JSON: the text is the message.
  }
  const Class = response.status === 409 ? PlantConflictError : PlantStoreError;
  return new Class(response.status, message, {
    error,
    retryAfter: retryAfterSeconds(response.headers),
    requestId: response.headers.get('x-request-id') ?? undefined,
  });
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      signal?.removeEventListener('abort', aborted);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const aborted = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', aborted, { once: true });
  });
}

/** The wait before attempt `failures + 1`: Retry-After with up to 20% more, else doubling with full jitter. */
function retryDelay(t: Transport, failures: number, retryAfter: number | undefined): number {
  if (retryAfter !== undefined) return retryAfter * 1000 * (1 + Math.random() * 0.2);
  return Math.min(t.maxDelayMs, t.baseDelayMs * 2 ** (failures - 1)) * (0.5 + Math.random() * 0.5);
}

export function networkError(error: unknown): PlantStoreError {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  const detail = typeof cause?.message === 'string' ? `: ${cause.message}` : error instanceof Error ? `: ${error.message}` : '';
  return new PlantStoreError(0, `the request did not reach the server${detail}`, { cause: error });
}

export interface Call {
  readonly method: string;
  readonly path: string;
  readonly body?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Safe to send again: after a network error, a 503 or a 429. */
  readonly retry: boolean;
  readonly signal?: AbortSignal | undefined;
}

/**
 * One call, tried again while it may be: a network error, a 503 or a 429, up to the attempts and waits allowed. The
 * answer is returned whatever its status, but a retryable one that ran out of attempts becomes its error.
 */
export async function call(t: Transport, request: Call): Promise<Response> {
  const url = endpoint(t, request.path);
  for (let attempt = 1; ; attempt += 1) {
    let response: Response;
    try {
      response = await t.fetch(url, {
        method: request.method,
        headers: { ...t.headers, ...request.headers },
        ...(request.body === undefined ? {} : { body: request.body }),
        ...(request.signal ? { signal: request.signal } : {}),
      });
    } catch (error) {
      if (request.signal?.aborted) throw error;
      const failure = networkError(error);
      if (!request.retry || attempt >= t.attempts) throw failure;
      await sleep(retryDelay(t, attempt, undefined), request.signal);
      continue;
    }
    if (response.status !== 503 && response.status !== 429) return response;
    const failure = await answerError(response);
    const wait = retryDelay(t, attempt, failure.retryAfter);
    if (!request.retry || attempt >= t.attempts || (failure.retryAfter ?? 0) * 1000 > t.maxDelayMs) throw failure;
    await sleep(Math.min(wait, t.maxDelayMs), request.signal);
  }
}
