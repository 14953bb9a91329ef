import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { toErrorReply } from '../error-reply.js';
import type { RefusalLog } from '../refusal-log.js';

export interface ErrorHandlerOptions {
  /** BODY_LIMIT_BYTES, named by the 413 message. */
  readonly bodyLimit: number;
  /** Where writes refused for a full write queue are counted, instead of a log line each. */
  readonly refusals?: RefusalLog;
}

/**
 * Answers an error as its Error record (src/http/error-reply.ts maps every error in one place). The app sets it as
 * the error handler here, and hands it to Fastify's frameworkErrors option for the errors the router raises first.
 */
export function errorReplier({ bodyLimit, refusals }: ErrorHandlerOptions) {
  return (error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const { status, headers, body } = toErrorReply(error, request.log, bodyLimit, refusals);
    // Answered before its body was read (401, 404, 405, 429 at onRequest; 413 part-way): kept alive, the connection
    // would have Node read and discard the rest however large, and a body that stalls would earn a second answer (408).
    if (hasUnreadBody(request.raw)) reply.header('connection', 'close');
    return reply.code(status).headers(headers).type('application/json').send(body);
  };
}

/** Every error a route, hook or parser raises is answered as an Error record. */
export const errorHandler = fastifyPlugin<ErrorHandlerOptions>(
  (app, options, done) => {
    app.setErrorHandler(errorReplier(options));
    done();
  },
  { name: 'error-handler', fastify: '5.x' },
);

/** A request that declared a body (a length or chunked encoding) not yet read to its end. */
function hasUnreadBody(request: IncomingMessage): boolean {
  if (request.complete) return false;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
