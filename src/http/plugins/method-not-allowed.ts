import { METHODS as NODE_METHODS } from 'node:http';
import type { FastifyRequest, HTTPMethods } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { MethodNotAllowedError } from '../errors.js';
import { openApiPath, type RouteSpec } from '../route-spec.js';

/**
 * Every method Node's parser takes (it refuses others as malformed): a known path answers the ones it does not take
 * with 405 and Allow, an unknown path with 404, whatever the method.
 */
const METHODS = NODE_METHODS as readonly HTTPMethods[];

export interface MethodNotAllowedOptions {
  readonly routes: readonly RouteSpec[];
}

/** For each path the routes serve, a route taking every other method, which answers 405 with the methods it takes. */
export const methodNotAllowed = fastifyPlugin<MethodNotAllowedOptions>(
  (app, { routes }, done) => {
    for (const method of METHODS) if (!app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });
    const allowedByUrl = new Map<string, HTTPMethods[]>();
    for (const route of routes) {
      const allowed = allowedByUrl.get(route.url) ?? [];
      allowed.push(route.method, ...(route.method === 'GET' ? (['HEAD'] as const) : []));
      allowedByUrl.set(route.url, allowed);
    }
    for (const [url, allowed] of allowedByUrl) {
      const others = METHODS.filter((method) => !allowed.includes(method));
      // Named as in /openapi.json (/plants/{id}): the client never sees Fastify's /plants/:id syntax.
      const notAllowed = (request: FastifyRequest) => new MethodNotAllowedError(request.method, openApiPath(url), allowed);
      app.route({
        method: others,
        url,
        // Like a 404, decided before the body is read. No token is asked for: which methods a path takes is public,
        // in /openapi.json, so authenticating first would only hide it from clients that have no token yet.
        onRequest: (request, _reply, hookDone) => hookDone(notAllowed(request)),
        ...app.routeTiming(url),
        // Never reached (onRequest always answers); Fastify requires a handler.
        handler: async (request) => {
          throw notAllowed(request);
        },
      });
    }
    done();
  },
  { name: 'method-not-allowed', fastify: '5.x', dependencies: ['error-handler', 'request-checks', 'request-timing'] },
);
