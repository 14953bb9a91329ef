/**
 * The HTTP edge's errors: what a client is told. The HTTP status doubles as the stable numeric `error` code of the
 * Error record (see docs/api.md, "Errors"). The edge raises these itself (parsing, authentication headers, routing);
 * the domain, auth and storage raise their own errors, and src/http/error-reply.ts, the one place that builds
 * Error records, maps those to these.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    // A 4xx is the client's doing: where in the server it was decided is no help to anyone reading it, and capturing
    // that stack costs more than the rest of a refused request (a client retrying without a token makes one or two
    // per request). A 5xx keeps its stack.
    const stackTraceLimit = Error.stackTraceLimit;
    if (status < 500) Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = new.target.name;
  }
}

export class BadRequestError extends ApiError {
  constructor(message: string, headers?: Record<string, string>) {
    super(400, message, headers);
  }
}

const REALM = 'Bearer realm="plantstore"';

export class UnauthorizedError extends ApiError {
  /**
   * `reason` is the RFC 6750 error code, absent when the client sent no bearer credentials at all; `description` its
   * error_description, for the client's developer (printable ASCII without quotes or backslashes, RFC 6750 §3).
   */
  constructor(message: string, reason?: 'invalid_token', description?: string) {
    const challenge = reason ? `${REALM}, error="${reason}"${description ? `, error_description="${description}"` : ''}` : REALM;
    super(401, message, { 'www-authenticate': challenge });
  }
}

/** RFC 6750 §3.1: a valid token without the scope the operation needs; the challenge names the scope. */
export class InsufficientScopeError extends ApiError {
  constructor(message: string, scope: string) {
    super(403, message, { 'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` });
  }
}

/** RFC 6750 §3.1: a malformed Authorization header is a bad request, still with a challenge. */
export class MalformedCredentialsError extends ApiError {
  constructor(message: string) {
    super(400, message, { 'www-authenticate': `${REALM}, error="invalid_request"` });
  }
}

export class NotFoundError extends ApiError {
  constructor(message: string) {
    super(404, message);
  }
}

export class MethodNotAllowedError extends ApiError {
  constructor(method: string, url: string, allowed: readonly string[]) {
    super(405, `method ${method} is not allowed on ${url}; allowed: ${allowed.join(', ')}`, { allow: allowed.join(', ') });
  }
}

/** The client's Accept header excludes every media type the operation can answer (RFC 9110 §15.5.7). */
export class NotAcceptableError extends ApiError {
  constructor(message: string) {
    super(406, message);
  }
}

export class ConflictError extends ApiError {
  constructor(message: string) {
    super(409, message);
  }
}

export class PayloadTooLargeError extends ApiError {
  constructor(limit: number) {
    super(413, `request body is larger than the limit of ${limit} bytes`);
  }
}

export class UnsupportedMediaTypeError extends ApiError {
  constructor(message: string, headers?: Record<string, string>) {
    super(415, message, headers);
  }
}

/** RFC 9110 §10.1.1: an Expect header with any expectation but 100-continue. */
export class ExpectationFailedError extends ApiError {
  constructor(expectation: string) {
    super(417, `Expect: ${JSON.stringify(expectation)} cannot be met; only 100-continue is supported`);
  }
}

export class TooManyRequestsError extends ApiError {
  constructor(retryAfterSeconds: number, why = 'rate limit exceeded') {
    super(429, `${why}; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) });
  }
}

/** The request asks for something this server does not implement (RFC 9110 §15.6.2): a transfer coding but chunked. */
export class NotImplementedError extends ApiError {
  constructor(message: string) {
    super(501, message);
  }
}

/** Storage cannot take or answer the request now (overloaded, unreachable, disk full, locked); retrying later may work. */
export class ServiceUnavailableError extends ApiError {
  constructor(message: string, retryAfterSeconds = 1) {
    super(503, message, { 'retry-after': String(retryAfterSeconds) });
  }
}
