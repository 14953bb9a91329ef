import fastifyPlugin from 'fastify-plugin';
import { REQUEST_ID_HEADER } from '../request-id.js';

/**
 * Every answer carries its request's id (Fastify's genReqId is src/http/request-id.ts's requestIdOf). Register it
 * first: the first onRequest hook sets the header, and a header set then stays through the error handler, so it is
 * also on the errors decided at onRequest (404, 405, 401, 429) and after it (400, 413, 415, 500).
 */
export const requestId = fastifyPlugin(
  (app, _options, done) => {
    app.addHook('onRequest', (request, reply, hookDone) => {
      reply.header(REQUEST_ID_HEADER, request.id);
      hookDone();
    });
    done();
  },
  { name: 'request-id', fastify: '5.x' },
);
