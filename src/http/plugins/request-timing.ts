import type { onResponseHookHandler } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { UNMATCHED_ROUTE } from '../../observability/metrics.js';
import type { Services } from '../../services.js';
import { openApiPath, type RouteSpec } from '../route-spec.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The onResponse hook that times the requests of the route at `url` (none when METRICS=off), for its route options. */
    routeTiming(url: string): { onResponse?: onResponseHookHandler };
  }
}

export interface RequestTimingOptions {
  readonly metrics: Services['metrics'];
  /** Every route the app serves: their methods are the method labels; any other method shares one label. */
  readonly routes: readonly RouteSpec[];
}

/**
 * http_request_duration_seconds: each route times its own requests under its OpenAPI path, so the hot path looks
 * nothing up; a request no route matched is timed under one fixed label, never its path, and a method no route takes
 * under one fixed method label (the 405 routes take every method Node parses).
 */
export const requestTiming = fastifyPlugin<RequestTimingOptions>(
  (app, { metrics, routes }, done) => {
    const routedMethods = new Set(routes.flatMap((route) => (route.method === 'GET' ? ['GET', 'HEAD'] : [route.method])));
    app.decorate('routeTiming', (url: string): { onResponse?: onResponseHookHandler } => {
      if (!metrics) return {};
      const durations = metrics.route(openApiPath(url), routedMethods);
      return {
        onResponse: (request, reply, hookDone) => {
          durations.observe(request.method, reply.statusCode, reply.elapsedTime / 1000);
          hookDone();
        },
      };
    });
    if (metrics) {
      const unmatched = metrics.route(UNMATCHED_ROUTE, routedMethods);
      app.addHook('onResponse', (request, reply, hookDone) => {
        if (request.is404) unmatched.observe(request.method, reply.statusCode, reply.elapsedTime / 1000);
        hookDone();
      });
    }
    done();
  },
  { name: 'request-timing', fastify: '5.x' },
);
