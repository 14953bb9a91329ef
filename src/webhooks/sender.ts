import type { IncomingHttpHeaders } from 'node:http';
import { Agent, type Dispatcher } from 'undici';
import { guardedConnector, type Resolver } from './address-policy.js';

/** What the subscriber's answer may cost: this much of its body is read (and thrown away), then the connection is dropped. */
const ANSWER_BODY_LIMIT_BYTES = 4096;
/** How long an idle keep-alive connection to a subscriber is kept for the next event. */
const KEEP_ALIVE_MS = 30_000;

export interface WebhookRequest {
  readonly url: string;
  readonly id: string;
  readonly timestampSeconds: number;
  readonly body: string;
  readonly signature: string;
  /** The W3C traceparent of this attempt's span (src/tracing/), sent when the event's create was traced. */
  readonly traceparent?: string;
}

/** One attempt's result, before the dispatcher decides what follows. */
export interface AttemptAnswer {
  /** The status answered; null when there was no answer (connection refused, timeout, refused address). */
  readonly status: number | null;
  /** Why there was no answer, in a few words; null when there was one. */
  readonly error: string | null;
  /** From a Retry-After header on a 429 or 503, in milliseconds. */
  readonly retryAfterMs?: number;
}

/** The error of an attempt cut short by interrupt(). */
export const INTERRUPTED = 'interrupted by shutdown';

export interface SenderOptions {
  readonly timeoutMs: number;
  readonly allowPrivateNetworks: boolean;
  readonly resolve: Resolver;
  /** Connections per subscriber origin: as many as attempts in flight to one subscription. */
  readonly connectionsPerOrigin: number;
}

/** Retry-After as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), in milliseconds from `now`; undefined when unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Where a subscription URL's requests go, parsed once per URL rather than once per attempt. */
interface Target {
  readonly origin: string;
  readonly path: string;
}

/** Parsed subscription URLs kept at most: one per subscription in practice; a bound, not a tuning knob. */
const TARGETS_KEPT = 1024;

/**
 * One attempt on undici's dispatch API. It ends once: with the answer's status once one came (its body read to the
 * end, cut off at the limit, failed or cut short: the status is what counts), otherwise with why there was none (a
 * connection error, the time limit, shutdown). Anything undici reports after that is ignored.
 */
class Attempt implements Dispatcher.DispatchHandler {
  readonly #resolve: (answer: AttemptAnswer) => void;
  #ended = false;
  #controller: Dispatcher.DispatchController | undefined;
  /** Why it ended before the request reached a connection: undici's controller is aborted with it once it does. */
  #abortWith: Error | undefined;
  #status: number | null = null;
  #retryAfter: string | string[] | undefined;
  #bodyBytes = 0;

  constructor(resolve: (answer: AttemptAnswer) => void) {
    this.#resolve = resolve;
  }

  /** Ends the attempt now (time limit, shutdown) and drops its request. */
  cut(error: string): void {
    this.#endWith(error);
    const reason = new Error(error);
    if (this.#controller) this.#controller.abort(reason);
    else this.#abortWith = reason;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#abortWith) controller.abort(this.#abortWith);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // 1xx answers are interim: the final status follows on the same request.
    if (statusCode < 200) return;
    this.#status = statusCode;
    this.#retryAfter = headers['retry-after'];
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    // Read a little (so a short answer leaves the connection reusable), then let go: a huge or endless answer is cut off.
    this.#bodyBytes += chunk.length;
    if (this.#bodyBytes > ANSWER_BODY_LIMIT_BYTES) {
      this.#answered();
      controller.abort(new Error('answer body over the limit'));
    }
  }

  onResponseEnd(): void {
    this.#answered();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.fail(error);
  }

  /** Ends the attempt with an error undici reported, or with the status if one had come. */
  fail(error: unknown): void {
    this.#endWith(describe(error));
  }

  /** Ends with the answer's status if one came, otherwise with `error`. */
  #endWith(error: string): void {
    if (this.#status !== null) this.#answered();
    else this.#end({ status: null, error });
  }

  #answered(): void {
    const status = this.#status as number;
    const after = status === 429 || status === 503 ? retryAfterMs(this.#retryAfter, Date.now()) : undefined;
    this.#end(after === undefined ? { status, error: null } : { status, error: null, retryAfterMs: after });
  }

  #end(answer: AttemptAnswer): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#resolve(answer);
  }
}

/**
 * Sends webhook attempts with undici: keep-alive connections per subscriber (an Agent pools them per origin), the
 * address check at connect time (guardedConnector), no redirects (a dispatch follows none), one time limit over the
 * whole attempt, and an answer read only up to ANSWER_BODY_LIMIT_BYTES and never trusted. It uses undici's dispatch
 * API rather than `request()`, which would make a body stream and a promise chain per answer only to throw them
 * away; an attempt is made for every create and subscription, so that cost is paid per create
 * (docs/benchmarks.md, "Figures other pages rest on").
 */
export class WebhookSender {
  readonly #agent: Agent;
  readonly #timeoutMs: number;
  /** Each attempt in flight, so interrupt() can cut them short (shutdown). */
  readonly #inFlight = new Set<Attempt>();
  readonly #targets = new Map<string, Target>();
  #interrupted = false;

  constructor(options: SenderOptions) {
    this.#timeoutMs = options.timeoutMs;
    this.#agent = new Agent({
      connect: guardedConnector({ allowPrivateNetworks: options.allowPrivateNetworks, resolve: options.resolve, timeoutMs: options.timeoutMs }),
      connections: options.connectionsPerOrigin,
      keepAliveTimeout: KEEP_ALIVE_MS,
      keepAliveMaxTimeout: KEEP_ALIVE_MS,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      // A subscriber cannot make this process hold a big header block.
      maxHeaderSize: 16 * 1024,
    });
  }

  /** Never rejects: every failure is an answer with an error. One timer per attempt. */
  send(message: WebhookRequest): Promise<AttemptAnswer> {
    if (this.#interrupted) return Promise.resolve({ status: null, error: INTERRUPTED });
    let target: Target;
    try {
      target = this.#target(message.url);
    } catch (error) {
      return Promise.resolve({ status: null, error: describe(error) });
    }
    return new Promise<AttemptAnswer>((resolve) => {
      const attempt = new Attempt((answer) => {
        clearTimeout(timer);
        this.#inFlight.delete(attempt);
        resolve(answer);
      });
      const timer = setTimeout(() => attempt.cut(`timed out after ${this.#timeoutMs} ms`), this.#timeoutMs);
      this.#inFlight.add(attempt);
      try {
        this.#agent.dispatch(
          {
            origin: target.origin,
            path: target.path,
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'user-agent': 'plantstore-webhooks/1.0',
              'webhook-id': message.id,
              'webhook-timestamp': String(message.timestampSeconds),
              'webhook-signature': message.signature,
              ...(message.traceparent === undefined ? {} : { traceparent: message.traceparent }),
            },
            body: message.body,
          },
          attempt,
        );
      } catch (error) {
        // A dispatch refused at once (the agent closed, invalid options) ends the attempt with that error.
        attempt.fail(error);
      }
    });
  }

  #target(url: string): Target {
    let target = this.#targets.get(url);
    if (target === undefined) {
      const parsed = new URL(url);
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
      if (this.#targets.size >= TARGETS_KEPT) this.#targets.clear();
      this.#targets.set(url, target);
    }
    return target;
  }

  /** Cuts every attempt in flight short (each answers INTERRUPTED) and refuses later ones the same way. */
  interrupt(): void {
    this.#interrupted = true;
    for (const attempt of this.#inFlight) attempt.cut(INTERRUPTED);
  }

  /** Whether interrupt() was called: an attempt without an answer after it was cut short, not failed. */
  get interrupted(): boolean {
    return this.#interrupted;
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}

/** A connection error in a few words, with its code when it has one; never the answer's body. */
function describe(error: unknown): string {
  const { code, message, cause } = error as { code?: unknown; message?: unknown; cause?: unknown };
  if (cause instanceof Error && cause !== error) return describe(cause);
  const text = typeof message === 'string' && message ? message : String(error);
  return (typeof code === 'string' && !text.includes(code) ? `${code}: ${text}` : text).slice(0, 300);
}
