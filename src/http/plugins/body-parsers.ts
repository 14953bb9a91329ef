import type { IncomingMessage } from 'node:http';
import fastifyPlugin from 'fastify-plugin';
import { UnsupportedMediaTypeError } from '../errors.js';
import { checkContentEncoding, checkJsonMediaType, parseJsonBody } from '../json-body.js';
import { LineStreamBody, NDJSON } from '../ndjson.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route takes a line-stream body beside JSON (RouteSpec.lineStream): the NDJSON parser hands it the stream. */
    lineStream?: boolean;
  }
}

/**
 * The only request bodies the API reads: JSON (ids kept exact, src/http/json-body.ts), and a line stream where a route
 * takes one. Fastify's own parsers are removed, so any other media type is answered 415.
 */
export const bodyParsers = fastifyPlugin(
  (app, _options, done) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, parsed) => {
      // Many clients send Content-Type on every request: an empty body is only an error where a body is expected.
      if ((body as Buffer).length === 0 && !request.routeOptions.schema?.body) {
        parsed(null, undefined);
        return;
      }
      try {
        checkContentEncoding(request.headers['content-encoding']);
        checkJsonMediaType(request.headers['content-type'] ?? '');
        parsed(null, parseJsonBody(body as Buffer));
      } catch (error) {
        parsed(error as Error, undefined);
      }
    });

    // A streamed bulk create (POST /plants as NDJSON): the body is not read here but handed to the route as the stream
    // it is, read line by line as lines commit (src/http/ndjson.ts). Only routes that say they take it (lineStream) do.
    app.addContentTypeParser(NDJSON, (request, payload, parsed) => {
      try {
        if (request.routeOptions.config.lineStream !== true) {
          throw new UnsupportedMediaTypeError('Content-Type must be application/json');
        }
        checkContentEncoding(request.headers['content-encoding']);
        checkJsonMediaType(request.headers['content-type'] ?? '');
        parsed(null, new LineStreamBody(payload as IncomingMessage));
      } catch (error) {
        parsed(error as Error, undefined);
      }
    });
    done();
  },
  { name: 'body-parsers', fastify: '5.x' },
);
