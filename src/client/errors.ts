/**
 * What the client throws for an answer it does not turn into a value: the server's Error record, its status, the
 * Retry-After it sent, and the request id to quote to the operator. A network failure has status 0 and its cause.
 */
export class PlantStoreError extends Error {
  override readonly name: string = 'PlantStoreError';
  /** The HTTP status, or 0 when no answer came (connection refused, reset, DNS, ...). */
  readonly status: number;
  /** The Error record's `error` (the status), or 0 when the answer was no Error record. */
  readonly error: number;
  /** Seconds the server asked to wait (Retry-After), when it did. */
  readonly retryAfter: number | undefined;
  /** The answer's X-Request-Id. */
  readonly requestId: string | undefined;

  constructor(
    status: number,
    message: string,
    options: { error?: number; retryAfter?: number | undefined; requestId?: string | undefined; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = status;
    this.error = options.error ?? 0;
    this.retryAfter = options.retryAfter;
    this.requestId = options.requestId ?? undefined;
  }

  /** A 409: the id is stored with another name or tag. Never retried. */
  get conflict(): boolean {
    return this.status === 409;
  }
}

/** A 409 from a create: the id is stored with another name or tag. */
export class PlantConflictError extends PlantStoreError {
  override readonly name: string = 'PlantConflictError';
}

/** A webhook whose signature or timestamp does not check out. */
export class WebhookVerificationError extends Error {
  override readonly name: string = 'WebhookVerificationError';
}
