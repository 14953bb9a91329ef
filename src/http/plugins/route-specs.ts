import fastifyPlugin from 'fastify-plugin';
import type { Tracing } from '../../tracing/tracing.js';
import type { RouteSpec } from '../route-spec.js';
import { withTrace } from './request-tracing.js';

export interface RouteSpecsOptions {
  readonly routes: readonly RouteSpec[];
  readonly tracing: Tracing | undefined;
}

/**
 * Serves each RouteSpec as its schemas say, with its token check and rate limit at onRequest (a public route has
 * neither) and its own timing. /openapi.json is built from the same objects (src/http/openapi.ts).
 */
export const routeSpecs = fastifyPlugin<RouteSpecsOptions>(
  (app, { routes, tracing }, done) => {
    const rateLimitHook = app.tokenRateLimit ? [app.tokenRateLimit.onRequest] : [];
    for (const route of routes) {
      app.route({
        method: route.method,
        url: route.url,
        schema: {
          ...route.schema,
          // With a line-stream media type beside it, the JSON body schema is the application/json body's only.
          ...(route.lineStream && route.schema.body ? { body: { content: { 'application/json': { schema: route.schema.body } } } } : {}),
          response: withoutNulls(route.schema.response),
        },
        ...(route.lineStream ? { config: { lineStream: true } } : {}),
        ...(route.scope ? { onRequest: [app.authenticateFor(route.scope, route.queryToken === true), ...rateLimitHook] } : {}),
        ...app.routeTiming(route.url),
        handler: tracing ? withTrace(tracing, route.handler) : route.handler,
      });
    }
    done();
  },
  {
    name: 'route-specs',
    fastify: '5.x',
    // Each route takes the error handler and hooks registered before it: they must be in place first.
    dependencies: ['error-handler', 'body-parsers', 'request-checks', 'authentication', 'token-rate-limit', 'request-timing'],
  },
);

/** Statuses documented without a schema are sent as they are. */
function withoutNulls(response: RouteSpec['schema']['response']): Record<number, object> {
  return Object.fromEntries(Object.entries(response).filter(([, schema]) => schema !== null)) as Record<number, object>;
}
