import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { errorCodes, type FastifyRequest } from 'fastify';
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

const UNSUPPORTED_MEDIA_TYPE = 'Content-Type must be application/json';

/**
 * A body without a Content-Type: nothing when it turns out to be empty (a chunked body of no chunk), which is
 * then no body at all, and 415 at its first byte otherwise, as for a Content-Type no parser takes. A request to no
 * route goes on unread to its 404 (or 405), as Fastify sends it when no parser matches.
 */
function emptyOrUnsupported(request: FastifyRequest, payload: Readable, parsed: (error: Error | null, body?: unknown) => void): void {
  if (request.is404) {
    parsed(null, undefined);
    return;
  }
  if (request.headers['content-type'] !== undefined) {
    parsed(new UnsupportedMediaTypeError(UNSUPPORTED_MEDIA_TYPE));
    return;
  }
  const settle = (error: Error | null) => {
    payload.off('data', onData).off('end', onEnd).off('error', onError);
    parsed(error, undefined);
  };
  const onData = () => settle(new UnsupportedMediaTypeError(UNSUPPORTED_MEDIA_TYPE));
  const onEnd = () => settle(null);
  const onError = (error: Error) => settle(error);
  payload.on('data', onData).on('end', onEnd).on('error', onError);
}

/**
 * The whole body, read as Fastify's `parseAs: 'buffer'` reads it (413 past `limit`, declared or counted; 400 when
 * it ends short of its Content-Length or the stream fails), but a body that came in one chunk, as nearly every
 * JSON body does, is that chunk: Fastify copies it into a new Buffer, which the parser here only reads while it
 * parses, at once, and keeps nothing of.
 */
function readWholeBody(request: FastifyRequest, payload: Readable, limit: number, read: (error: Error | null, body: Buffer) => void): void {
  const declared = Number(request.headers['content-length']);
  if (declared > limit) {
    read(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE(), EMPTY);
    return;
  }
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let received = 0;
  const stop = () => payload.off('data', onData).off('end', onEnd).off('error', onEnd);
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > limit) {
      stop();
      read(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE(), EMPTY);
      return;
    }
    if (first === undefined) first = chunk;
    else (more ??= [first]).push(chunk);
  };
  const onEnd = (error?: Error & { statusCode?: number }) => {
    stop();
    if (error != null) {
      if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400;
      read(error, EMPTY);
    } else if (!Number.isNaN(declared) && received !== declared) {
      read(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH(), EMPTY);
    } else {
      read(null, more === undefined ? (first ?? EMPTY) : Buffer.concat(more, received));
    }
  };
  payload.on('data', onData).on('end', onEnd).on('error', onEnd);
  payload.resume();
}

const EMPTY = Buffer.alloc(0);

/**
 * The only request bodies the API reads: JSON (ids kept exact, src/http/json-body.ts), and a line stream where a route
 * takes one. Fastify's own parsers are removed, so any other media type is answered 415.
 */
export const bodyParsers = fastifyPlugin<{ readonly bodyLimit: number }>(
  (app, { bodyLimit }, done) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', emptyOrUnsupported);
    app.addContentTypeParser('application/json', (request, payload, parsed) => {
      readWholeBody(request, payload, bodyLimit, (error, body) => {
        if (error) {
          parsed(error, undefined);
          return;
        }
        // Many clients send Content-Type on every request: an empty body is no body, refused only where one is required.
        if (body.length === 0) {
          parsed(null, undefined);
          return;
        }
        try {
          checkContentEncoding(request.headers['content-encoding']);
          checkJsonMediaType(request.headers['content-type'] ?? '');
          parsed(null, parseJsonBody(body));
        } catch (failure) {
          parsed(failure as Error, undefined);
        }
      });
    });

    // A streamed bulk create (POST /plants as NDJSON): the body is not read here but handed to the route as the stream
    // it is, read line by line as lines commit (src/http/ndjson.ts). Only routes that say they take it (lineStream) do.
    app.addContentTypeParser(NDJSON, (request, payload, parsed) => {
      try {
        if (request.routeOptions.config.lineStream !== true) {
          throw new UnsupportedMediaTypeError(UNSUPPORTED_MEDIA_TYPE);
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
