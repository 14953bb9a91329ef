import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The header a request's id comes in (when a client or proxy sends one) and every response carries it back in. */
export const REQUEST_ID_HEADER = 'x-request-id';

/** Printable ASCII, 1 to 128 characters: what a log line and a response header can carry as it came. */
const ACCEPTED_REQUEST_ID = /^[\x20-\x7e]{1,128}$/;

/**
 * The request's id (Fastify's genReqId): the incoming X-Request-Id when it is printable ASCII of at most 128
 * characters, so a caller's or a proxy's log lines and ours can be joined; otherwise a new random UUID, unique across
 * replicas and restarts. Fastify's own requestIdHeader option takes any value as it came, control characters and
 * all, into every log line of the request and back out in the response.
 */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  return typeof given === 'string' && ACCEPTED_REQUEST_ID.test(given) ? given : randomUUID();
}
