import type { FastifyRequest, RouteOptions } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { BadRequestError, NotFoundError } from '../errors.js';
import { framingProblem } from '../http-server.js';
import { QUERY_ERROR, type ParsedQuery } from '../query-string.js';
import { REQUEST_ID_HEADER } from '../request-id.js';

type HookDone = (error?: Error) => void;

/**
 * What every request is checked for before its route runs, in one onRequest hook and one preValidation hook per
 * route (a hook each costs every request its call, so there are no more than the order of the checks needs):
 *
 * - onRequest, first of all hooks: its id on the answer (Fastify's genReqId is src/http/request-id.ts's
 *   requestIdOf; a header set here stays through the error handler, so it is also on the errors decided at onRequest,
 *   404, 405, 401, 429, and after it, 400, 413, 415, 500); framing that Node would refuse itself with an empty body
 *   (the server is made to hand these requests over: httpServer), decided before the route and before the body is
 *   read, with the connection closed; and a path no route has, answered 404 whatever its method (a 404 is decided by
 *   the path alone, so it is answered here: the not-found handler would run only after the body had been read and
 *   parsed, turning a POST to an unknown path into a 400, 413 or 415). plugins/method-not-allowed.ts answers known
 *   paths.
 * - preValidation, after the route's token check: a query string the parser (src/http/query-string.ts) could not
 *   read; then, for a route with a body schema, a body sent in none of the ways of sending one (no body at all,
 *   Content-Length: 0 with or without a Content-Type, a chunked body of no chunk: each leaves request.body undefined,
 *   plugins/body-parsers.ts sees to the last two), refused once here for every such route rather than each handler
 *   meeting an undefined body.
 */
export const requestChecks = fastifyPlugin(
  (app, _options, done) => {
    const noRoute = (request: FastifyRequest) => new NotFoundError(`no route for ${request.method} ${request.url.split('?')[0]}`);
    app.addHook('onRequest', (request, reply, hookDone) => {
      reply.header(REQUEST_ID_HEADER, request.id);
      const problem = framingProblem(request.raw);
      if (problem) {
        reply.header('connection', 'close');
        hookDone(problem);
      } else if (request.is404) hookDone(noRoute(request));
      else hookDone();
    });
    app.setNotFoundHandler(async (request) => {
      throw noRoute(request);
    });
    app.addHook('onRoute', withPreValidation);
    done();
  },
  { name: 'request-checks', fastify: '5.x', dependencies: ['error-handler'] },
);

function checkQuery(request: FastifyRequest, _reply: unknown, hookDone: HookDone): void {
  hookDone((request.query as ParsedQuery)[QUERY_ERROR]);
}

function checkQueryAndBody(request: FastifyRequest, _reply: unknown, hookDone: HookDone): void {
  const error = (request.query as ParsedQuery)[QUERY_ERROR];
  if (error) hookDone(error);
  else hookDone(request.body === undefined ? new BadRequestError('request body is required') : undefined);
}

/** The route's preValidation check first, before any of its own. */
function withPreValidation(route: RouteOptions): void {
  const check = route.schema?.body === undefined ? checkQuery : checkQueryAndBody;
  const own = route.preValidation === undefined ? [] : Array.isArray(route.preValidation) ? route.preValidation : [route.preValidation];
  // A HEAD route Fastify adds for a GET copies the GET's options, this check included.
  if (own[0] !== check) route.preValidation = [check, ...own];
}
