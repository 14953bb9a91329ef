import type { FastifyRequest } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { NotFoundError } from '../errors.js';

/** A path no route has is answered 404 whatever its method (src/http/plugins/method-not-allowed.ts answers known paths). */
export const notFound = fastifyPlugin(
  (app, _options, done) => {
    const noRoute = (request: FastifyRequest) => new NotFoundError(`no route for ${request.method} ${request.url.split('?')[0]}`);
    // A 404 is decided by the path alone, so it is answered at onRequest: the not-found handler would run only after
    // the body had been read and parsed, turning a POST to an unknown path into a 400, 413 or 415.
    app.addHook('onRequest', (request, _reply, hookDone) => {
      if (request.is404) hookDone(noRoute(request));
      else hookDone();
    });
    app.setNotFoundHandler(async (request) => {
      throw noRoute(request);
    });
    done();
  },
  { name: 'not-found', fastify: '5.x', dependencies: ['error-handler', 'request-id', 'malformed-requests'] },
);
