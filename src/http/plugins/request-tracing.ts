import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest, FastifyServerOptions } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import type { Tracing } from '../../tracing/tracing.js';
import { lazyRequestLogger } from '../request-logger.js';
import { openApiPath, type RouteSpec } from '../route-spec.js';

export interface RequestTracingOptions {
  readonly tracing: Tracing;
}

/**
 * Ends each request's server span with its answer (or its abort), named by its route template, never its path. The
 * span begins with the request's logger (tracedLogger, Fastify's childLoggerFactory).
 */
export const requestTracing = fastifyPlugin<RequestTracingOptions>(
  (app, { tracing }, done) => {
    const routeOf = (request: FastifyRequest) => (request.is404 || !request.routeOptions.url ? undefined : openApiPath(request.routeOptions.url));
    app.addHook('onResponse', (request, reply, hookDone) => {
      tracing.endRequest(request.raw, routeOf(request), reply.statusCode);
      hookDone();
    });
    app.addHook('onRequestAbort', (request, hookDone) => {
      // No answer was sent: the client went away before it.
      tracing.endRequest(request.raw, routeOf(request), null);
      hookDone();
    });
    done();
  },
  { name: 'request-tracing', fastify: '5.x' },
);

/**
 * Each request's logger, made as Fastify makes it, once the request's server span has begun: every line it logs, the
 * first included, carries trace_id and span_id.
 */
export function tracedLogger(tracing: Tracing, scheme: string): FastifyServerOptions['childLoggerFactory'] {
  return function childLogger(this: FastifyInstance, logger, bindings, childOptions, raw) {
    const ids = tracing.startRequest(raw as IncomingMessage, scheme);
    return lazyRequestLogger.call(this, logger, ids ? { ...bindings, ...ids } : bindings, childOptions, raw);
  };
}

/** A route handler run with its request's span active, so the write it queues and the queries it makes join the trace. */
export function withTrace(tracing: Tracing, handler: RouteSpec['handler']): RouteSpec['handler'] {
  return function traced(this: FastifyInstance, request, reply) {
    return tracing.within(request.raw, () => handler.call(this, request, reply));
  } as RouteSpec['handler'];
}
