import type { FastifyBaseLogger, FastifyHttpOptions, FastifyReply, FastifyRequest } from 'fastify';
import type { Server as HttpServer } from 'node:http';
import type { Services } from '../services.js';
import { DebugRequestLog } from './debug-request-log.js';
import { describeValidationError, writeClientError } from './error-reply.js';
import { httpServer } from './http-server.js';
import { STRICT_AJV_OPTIONS } from './new-plant.js';
import { parseQueryString } from './query-string.js';
import { REQUEST_ID_HEADER, requestIdOf } from './request-id.js';
import { withTls, type TlsCredentials } from './tls.js';

/**
 * The options src/app.ts builds its Fastify instance with: the server (src/http/http-server.ts, HTTPS when `tls` is
 * given), the parsers, validation and logging every request goes through, `replyWithError` for the errors the
 * router raises before any route, and `childLoggerFactory`, which makes each request's logger.
 */
export function fastifyOptions(
  services: Services,
  tls: TlsCredentials | undefined,
  replyWithError: (error: unknown, request: FastifyRequest, reply: FastifyReply) => unknown,
  childLoggerFactory: FastifyHttpOptions<HttpServer>['childLoggerFactory'],
) {
  const { config } = services;
  return withTls({
    loggerInstance: services.log as FastifyBaseLogger,
    bodyLimit: config.limits.bodyBytes,
    routerOptions: { querystringParser: parseQueryString },
    logController: new DebugRequestLog(),
    // Every log line of a request carries it as reqId; every response carries it back (plugins/request-checks.ts).
    genReqId: requestIdOf,
    serverFactory: (handler) => httpServer(handler, config.http, services.log as FastifyBaseLogger, tls, config.workers, config.trustProxy),
    // Fastify's 503-on-close body is not an Error record; in-flight requests finish and new ones are refused by the closed listener.
    return503OnClosing: false,
    // The contract forbids silently changing data; `plantstore import` compiles NewPlant with the same options.
    ajv: { customOptions: { ...STRICT_AJV_OPTIONS } },
    schemaErrorFormatter: describeValidationError,
    clientErrorHandler: writeClientError,
    // Errors the router raises before any route or error handler (a path that is not valid percent-encoded UTF-8,
    // an over-long path parameter) would otherwise get Fastify's own body instead of an Error record. No hook runs
    // for them, so they are given the request id here.
    frameworkErrors: (error, request, reply) => replyWithError(error, request, reply.header(REQUEST_ID_HEADER, request.id)),
    // request.ip (the remoteAddress of request log lines), .protocol and .host follow X-Forwarded-* only from these.
    trustProxy: config.trustProxy.length > 0 ? [...config.trustProxy] : false,
    childLoggerFactory,
  }, tls);
}
