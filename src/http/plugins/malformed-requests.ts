import fastifyPlugin from 'fastify-plugin';
import { framingProblem } from '../http-server.js';
import { QUERY_ERROR, type ParsedQuery } from '../query-string.js';

/**
 * Requests Fastify would take that the API refuses as malformed, each as an Error record: framing that Node would
 * refuse itself with an empty body (the server is made to hand these requests over: httpServer), decided before the
 * route and before the body is read; and a query string the parser (src/http/query-string.ts) could not read.
 */
export const malformedRequests = fastifyPlugin(
  (app, _options, done) => {
    app.addHook('onRequest', (request, reply, hookDone) => {
      const problem = framingProblem(request.raw);
      if (problem) reply.header('connection', 'close');
      hookDone(problem);
    });
    app.addHook('preValidation', (request, _reply, hookDone) => {
      const error = (request.query as ParsedQuery)[QUERY_ERROR];
      if (error) hookDone(error);
      else hookDone();
    });
    done();
  },
  { name: 'malformed-requests', fastify: '5.x', dependencies: ['request-id'] },
);
