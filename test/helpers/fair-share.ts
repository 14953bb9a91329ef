/**
 * Clients for the connection-fairness tests and bench (test/process/connection-fairness.test.ts,
 * bench/connection-fairness.ts), each bound to a loopback address of its own (127.0.0.2 …: Linux routes all of
 * 127.0.0.0/8 to lo), since the server shares connections among client addresses: an attacker holding sockets, a
 * legitimate client sending many creates at once on a connection each, and a probe timing single requests.
 */
import { connect, type Socket } from 'node:net';
import { Agent } from 'undici';

/** What the server told each of many requests, counted. */
export interface Answers {
  /** Status → count, for every request answered. */
  readonly statuses: Map<number, number>;
  /** Answers other than 200 that are not a 503/429 Error record with Retry-After. */
  readonly unexplained: string[];
  /** Requests that got no answer: the error's code (UND_ERR_SOCKET, ECONNRESET …) → count. */
  readonly socketErrors: Map<string, number>;
}

function count<K>(map: Map<K, number>, key: K): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/** Why an answer is not a 200 nor a refusal the client is told how to retry, or undefined when it is one of those. */
async function unexplained(response: Response): Promise<string | undefined> {
  const text = await response.text();
  if (response.status === 200) return undefined;
  if (response.status !== 503 && response.status !== 429) return `${response.status}: ${text}`;
  if (!response.headers.get('retry-after')) return `${response.status} without Retry-After: ${text}`;
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (body.error !== response.status || typeof body.message !== 'string') return `${response.status} not an Error record: ${text}`;
  } catch {
    return `${response.status} not JSON: ${text}`;
  }
  return undefined;
}

/** The root cause's code of a failed fetch: undici wraps it as `cause`. */
function errorCode(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return String(error);
}

/**
 * `count` creates sent at once from `localAddress`, each on a connection of its own (an undici Agent without a
 * connection limit, and no pipelining: what a program that fires them all with fetch gets), ids from `firstId` on.
 */
export async function concurrentCreates(base: string, token: string, options: { count: number; localAddress: string; firstId: bigint }): Promise<Answers> {
  const agent = new Agent({ connections: null, pipelining: 0, localAddress: options.localAddress, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const answers: Answers = { statuses: new Map(), unexplained: [], socketErrors: new Map() };
  try {
    await Promise.all(
      Array.from({ length: options.count }, async (_, index) => {
        try {
          const response = await fetch(`${base}/plants`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: `{"id":${options.firstId + BigInt(index)},"name":"fair ${index}"}`,
            dispatcher: agent,
            // undici's own Agent type and the one Node's fetch is typed with are two copies of one shape.
          } as unknown as RequestInit);
          count(answers.statuses, response.status);
          const problem = await unexplained(response);
          if (problem) answers.unexplained.push(problem);
        } catch (error) {
          count(answers.socketErrors, errorCode(error));
        }
      }),
    );
  } finally {
    await agent.close();
  }
  return answers;
}

/** How an attacking socket holds its connection. */
export type HoldMode = 'idle' | 'slowloris' | 'keep-alive';

export interface Holder {
  /** Connections opened so far (each reopened as soon as it closes). */
  readonly opened: () => number;
  /** Stops reopening and closes every socket. */
  stop(): void;
}

/**
 * `count` sockets from `localAddress` that hold a connection without completing a request: `idle` connects and sends
 * nothing, `slowloris` sends a request's headers a byte every 500 ms, `keep-alive` sends one GET /healthz, reads the
 * answer and stays open. Each one is reopened as soon as the server closes it.
 */
export function holdSockets(port: number, options: { count: number; localAddress: string; mode: HoldMode }): Holder {
  const sockets = new Set<Socket>();
  let opened = 0;
  let stopped = false;
  const open = () => {
    if (stopped) return;
    opened += 1;
    const socket = connect({ port, host: '127.0.0.1', localAddress: options.localAddress });
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    let drip: NodeJS.Timeout | undefined;
    socket.once('connect', () => {
      if (options.mode === 'keep-alive') socket.write('GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n');
      if (options.mode === 'slowloris') {
        const headers = 'GET /healthz HTTP/1.1\r\nHost: a\r\nX-Slow: ' + 'x'.repeat(1000);
        let sent = 0;
        drip = setInterval(() => socket.write(headers[sent++ % headers.length] as string), 500);
      }
    });
    socket.once('close', () => {
      clearInterval(drip);
      sockets.delete(socket);
      // At once, as the attacker does; a connection refused at connect time is retried too.
      setImmediate(open);
    });
  };
  for (let index = 0; index < options.count; index += 1) open();
  return {
    opened: () => opened,
    stop() {
      stopped = true;
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** One probe's outcome: its status, or the error's code when it got no answer, and how long it took. */
export interface ProbeResult {
  readonly status: number | string;
  readonly ms: number;
}

/**
 * Sends `GET /healthz` and an authenticated create in turn from `localAddress`, each on a fresh connection, `count`
 * times, waiting `gapMs` between them; each given up after `timeoutMs`.
 */
export async function probe(
  base: string,
  token: string,
  options: { count: number; localAddress: string; gapMs: number; timeoutMs: number; firstId: bigint },
): Promise<{ healthz: ProbeResult[]; creates: ProbeResult[] }> {
  const agent = new Agent({ connections: null, pipelining: 0, localAddress: options.localAddress });
  const healthz: ProbeResult[] = [];
  const creates: ProbeResult[] = [];
  const timed = async (into: ProbeResult[], url: string, init: RequestInit) => {
    const started = performance.now();
    try {
      const response = await fetch(url, { ...init, headers: { ...init.headers, connection: 'close' }, signal: AbortSignal.timeout(options.timeoutMs), dispatcher: agent } as unknown as RequestInit);
      await response.arrayBuffer();
      into.push({ status: response.status, ms: performance.now() - started });
    } catch (error) {
      into.push({ status: errorCode(error), ms: performance.now() - started });
    }
  };
  try {
    for (let index = 0; index < options.count; index += 1) {
      await timed(healthz, `${base}/healthz`, {});
      await timed(creates, `${base}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: `{"id":${options.firstId + BigInt(index)},"name":"probe ${index}"}`,
      });
      await new Promise((resolve) => setTimeout(resolve, options.gapMs));
    }
  } finally {
    await agent.close();
  }
  return { healthz, creates };
}
