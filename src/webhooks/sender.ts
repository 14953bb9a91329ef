import { Agent, request } from 'undici';
import { guardedConnector, type Resolver } from './address-policy.js';

/** What the subscriber's answer may cost: this much of its body is read (and thrown away), then the connection is dropped. */
export const ANSWER_BODY_LIMIT_BYTES = 4096;
/** How long an idle keep-alive connection to a subscriber is kept for the next event. */
const KEEP_ALIVE_MS = 30_000;

export interface WebhookRequest {
  readonly url: string;
  readonly id: string;
  readonly timestampSeconds: number;
  readonly body: string;
  readonly signature: string;
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

/**
 * Sends webhook attempts with undici: keep-alive connections per subscriber (an Agent pools them per origin), the
 * address check at connect time (guardedConnector), no redirects (undici's request follows none unless told to),
 * one time limit over the whole attempt, and an answer read only up to ANSWER_BODY_LIMIT_BYTES and never trusted.
 */
export class WebhookSender {
  readonly #agent: Agent;
  readonly #timeoutMs: number;
  /** Each attempt in flight, so interrupt() can cut them short (shutdown). */
  readonly #inFlight = new Set<AbortController>();
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

  /**
   * Never rejects: every failure is an answer with an error. One controller and one timer per attempt, rather than
   * AbortSignal.any over a shutdown signal and AbortSignal.timeout: that costs several times as much per event
   * (BENCHMARKS.md, "Webhook"), and an attempt is made for every create.
   */
  async send(message: WebhookRequest): Promise<AttemptAnswer> {
    const controller = new AbortController();
    if (this.#interrupted) controller.abort();
    const timer = setTimeout(() => controller.abort(), this.#timeoutMs);
    this.#inFlight.add(controller);
    try {
      const response = await request(message.url, {
        dispatcher: this.#agent,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'plantstore-webhooks/1.0',
          'webhook-id': message.id,
          'webhook-timestamp': String(message.timestampSeconds),
          'webhook-signature': message.signature,
        },
        body: message.body,
        signal: controller.signal,
      });
      // Read a little (so a short answer leaves the connection reusable), then let go: a huge or endless answer is cut off.
      await response.body.dump({ limit: ANSWER_BODY_LIMIT_BYTES }).catch(() => undefined);
      const status = response.statusCode;
      const after = status === 429 || status === 503 ? retryAfterMs(response.headers['retry-after'], Date.now()) : undefined;
      return after === undefined ? { status, error: null } : { status, error: null, retryAfterMs: after };
    } catch (error) {
      if (this.#interrupted) return { status: null, error: INTERRUPTED };
      if (controller.signal.aborted) return { status: null, error: `timed out after ${this.#timeoutMs} ms` };
      return { status: null, error: describe(error) };
    } finally {
      clearTimeout(timer);
      this.#inFlight.delete(controller);
    }
  }

  /** Cuts every attempt in flight short (each answers INTERRUPTED) and refuses later ones the same way. */
  interrupt(): void {
    this.#interrupted = true;
    for (const controller of this.#inFlight) controller.abort();
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
