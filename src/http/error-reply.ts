import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifySchemaValidationError } from 'fastify';
import { ExpiredTokenError, InvalidTokenError, MissingScopeError } from '../auth/errors.js';
import { PlantConflictError, PlantNotFoundError } from '../plants/errors.js';
import { DrainingError } from '../health/readiness.js';
import { WriteQueueFullError } from '../plants/write-bound.js';
import { NO_NUL, type ErrorBody } from '../schemas.js';
import { NDJSON } from './ndjson.js';
import type { RefusalLog } from './refusal-log.js';
import { StorageUnavailableError } from '../storage/errors.js';
import {
  ApiError,
  BadRequestError,
  ConflictError,
  InsufficientScopeError,
  NotFoundError,
  PayloadTooLargeError,
  ServiceUnavailableError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
} from './errors.js';

export interface ErrorReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: ErrorBody;
}

/** Fastify's own errors, by code, in the service's words. */
function fromFrameworkError(error: { code?: string; statusCode?: number; message: string }, bodyLimit: number): ApiError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new UnsupportedMediaTypeError('Content-Type must be application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PayloadTooLargeError(bodyLimit);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new BadRequestError('request body length does not match Content-Length');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new BadRequestError('request body is empty; a JSON body is required');
    case 'FST_ERR_BAD_URL':
      return new BadRequestError('the request path is not valid percent-encoded UTF-8');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new ApiError(414, 'a path parameter is too long');
  }
  const status = error.statusCode;
  if (status !== undefined && status >= 400 && status < 500) return new ApiError(status, error.message);
  return undefined;
}

/** The domain's, authentication's and storage's own errors, as what a client is told. */
function fromServiceError(error: Error): ApiError | undefined {
  if (error instanceof PlantNotFoundError) return new NotFoundError(error.message);
  if (error instanceof PlantConflictError) return new ConflictError(error.message);
  if (error instanceof InvalidTokenError) return new UnauthorizedError(error.message, 'invalid_token');
  if (error instanceof ExpiredTokenError) return new UnauthorizedError(error.message, 'invalid_token', 'the token has expired');
  if (error instanceof MissingScopeError) return new InsufficientScopeError(error.message, error.scope);
  // Storage that cannot serve now, or a queue in front of it that is full: a retry later may work.
  if (error instanceof StorageUnavailableError || error instanceof WriteQueueFullError) return new ServiceUnavailableError(error.message);
  // /readyz during a shutdown.
  if (error instanceof DrainingError) return new ServiceUnavailableError(error.message);
  return undefined;
}

/**
 * The one mapping from anything thrown to the Error record: ApiErrors keep their status, the services' errors and
 * framework errors are translated, and anything else is a 500 whose detail goes to the log, never to the client.
 * A write refused because the write queue is full is overload answered as designed, not a fault: it goes to
 * `refusals`, counted, or without one to a warn line with no stack.
 */
export function toErrorReply(error: unknown, log: FastifyBaseLogger, bodyLimit: number, refusals?: RefusalLog): ErrorReply {
  const known =
    error instanceof ApiError
      ? error
      : error instanceof Error
        ? (fromServiceError(error) ?? fromFrameworkError(error as Error & { code?: string; statusCode?: number }, bodyLimit))
        : undefined;
  if (known) {
    if (error instanceof WriteQueueFullError) {
      if (refusals) refusals.writeQueueFull();
      else log.warn(known.message);
    }
    // 501 is the client's request asking for what is not implemented, not a failure of the server.
    else if (known.status >= 500 && known.status !== 501) log.error({ err: error }, known.message);
    return { status: known.status, headers: known.headers, body: { error: known.status, message: known.message } };
  }
  log.error({ err: error }, 'unhandled error');
  return { status: 500, headers: {}, body: { error: 500, message: 'internal server error' } };
}

const DESCRIBED: Record<string, (error: FastifySchemaValidationError) => string> = {
  required: (error) => `is missing required property '${String(error.params.missingProperty)}'`,
  additionalProperties: (error) => `has unknown property '${String(error.params.additionalProperty)}'`,
  type: (error) => `must be ${error.params.type === 'integer' ? 'an integer' : `of type ${String(error.params.type)}`}`,
  minLength: (error) => (error.params.limit === 1 ? 'must not be empty' : `must be at least ${String(error.params.limit)} characters long`),
  maxLength: (error) => `must be at most ${String(error.params.limit)} characters long`,
  pattern: (error) => (error.params.pattern === NO_NUL ? 'must not contain NUL characters' : `must match ${String(error.params.pattern)}`),
  format: (error) => `must be an integer of format ${String(error.params.format)}`,
};

/** "body.name must not be empty": which field, which rule. */
export function describeValidationError(errors: FastifySchemaValidationError[], dataVar: string): BadRequestError {
  const [first] = errors;
  if (!first) return new BadRequestError(`${dataVar} is invalid`);
  const field = dataVar + first.instancePath.replaceAll('/', '.');
  const describe = DESCRIBED[first.keyword];
  return new BadRequestError(`${field} ${describe ? describe(first) : (first.message ?? 'is invalid')}`);
}

/** Whether the response now on the socket is a streamed bulk create's answer, its request still being read. */
function answersALineStream(socket: Socket): boolean {
  const inProgress = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  return inProgress?.req.complete === false && String(inProgress.getHeader('content-type') ?? '').startsWith(NDJSON);
}

/** Sockets whose parser error is already being answered: Node reports the error again for every later chunk. */
const answering = new WeakSet<Socket>();

/**
 * Errors Node's HTTP parser meets before Fastify sees a request (malformed request line, oversized headers,
 * header timeout) still get an Error record, written straight to the socket, and the connection is closed.
 *
 * The error can arrive while an earlier, complete request on the same connection is still being answered: a valid
 * create followed, pipelined, by garbage. Writing now would put the 400 before that answer and end the socket under
 * it, so a create that was committed would look failed. Node queues pipelined responses and attaches them to the
 * socket one at a time (`_httpMessage`), so the 400 waits while the attached response is unfinished and its request
 * complete. A response whose request is incomplete belongs to the request the error is about (a broken chunk, a
 * body that never arrived): it can never finish, and the error is its answer.
 */
export function writeClientError(error: Error & { code?: string }, socket: Socket): void {
  // A streamed bulk create answers while its request is still being read, for as long as lines keep coming: it is
  // bounded by its own idle timeout (src/http/ndjson.ts), not by a time for the whole request.
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT' && answersALineStream(socket)) return;
  if (answering.has(socket)) return;
  answering.add(socket);
  const status =
    error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const message =
    status === 431 ? 'request headers are too large' : status === 408 ? 'request timed out' : 'malformed HTTP request';
  const body = JSON.stringify({ error: status, message } satisfies ErrorBody);
  const answer = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
  const writeWhenIdle = () => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const inProgress = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    // Node attaches the next queued response in its own 'finish' listener, which runs before this one.
    if (inProgress && !inProgress.writableFinished && inProgress.req.complete) inProgress.once('finish', writeWhenIdle);
    else socket.end(answer);
  };
  writeWhenIdle();
}

/**
 * The whole HTTP answer to a connection refused before it is read (src/http/connection-refusal.ts): a 503 Error
 * record with Retry-After, and `Connection: close`, since the request it answers was never read.
 */
export function refusalAnswer(why: 'queue full' | 'waited too long' | 'address overran'): string {
  const message =
    why === 'address overran'
      ? 'another connection from this client address sent more requests than the server holds for it; retry later'
      : `the server has no connection free for this client (${why === 'queue full' ? 'too many waiting' : 'waited too long'}); retry later`;
  const error = new ServiceUnavailableError(message);
  const body = JSON.stringify({ error: error.status, message } satisfies ErrorBody);
  const headers = Object.entries(error.headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return `HTTP/1.1 503 ${STATUS_CODES[503]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers}Connection: close\r\n\r\n${body}`;
}
