import type { FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import type { Static, TSchema } from 'typebox';
import type { Scope } from '../auth/scopes.js';
import type { LineStreamBody } from './ndjson.js';

/** The schemas of a route: Fastify validates its input, and serializes its answers, with them. */
export interface RouteSchemas {
  readonly body?: TSchema;
  readonly querystring?: TSchema;
  readonly params?: TSchema;
  readonly response: Readonly<Record<number, TSchema | null>>;
}

/** A second request media type an operation takes: see RouteSpec.lineStream. */
export interface LineStream {
  readonly mediaType: string;
  readonly line: TSchema;
  readonly result: TSchema;
}

/** The type of what `schema` validates: unknown for a part of the request the route has no schema for. */
type Validated<Schemas extends RouteSchemas, Part extends 'body' | 'querystring' | 'params'> = Schemas extends { readonly [P in Part]: infer Schema extends TSchema }
  ? Static<Schema>
  : unknown;

/**
 * The input a route's handler gets, typed from its schemas (what a type provider would derive): Fastify has validated
 * the body, query string and path parameters against them before the handler runs. A line-stream route's body is the
 * stream itself when the request is of that media type.
 */
interface RouteInput<Schemas extends RouteSchemas, Stream extends LineStream | undefined> {
  Body: Validated<Schemas, 'body'> | (Stream extends LineStream ? LineStreamBody : never);
  Querystring: Validated<Schemas, 'querystring'>;
  Params: Validated<Schemas, 'params'>;
}

/**
 * One route: Fastify registers it, and /openapi.json describes it, from this same object, so the document
 * cannot say anything the server does not enforce.
 */
export interface RouteSpec<Schemas extends RouteSchemas = RouteSchemas, Stream extends LineStream | undefined = LineStream | undefined> {
  readonly method: HTTPMethods;
  /** Fastify syntax: /plants/:id */
  readonly url: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  /**
   * The scope a token must hold to call it, checked with the token itself at onRequest, before the body is read (403
   * without it); null for a public route, which asks for no token.
   */
  readonly scope: Scope | null;
  /**
   * The token may also come as the `access_token` query parameter (RFC 6750 §2.3), for clients that cannot send an
   * Authorization header: a browser's EventSource. Only the event stream takes it; log lines redact it.
   */
  readonly queryToken?: boolean;
  readonly schema: Schemas;
  /**
   * A second request media type the operation takes, whose body the handler reads itself as a stream of lines (a
   * streamed bulk create): each line is a `line`, and the 200 answer is a stream of `result` lines of the same media
   * type. Fastify validates only the application/json body against `schema.body`.
   */
  readonly lineStream?: Stream;
  /** The media type of a status's body when it is not application/json (its body is then documented as a string). */
  readonly responseMediaTypes?: Readonly<Record<number, string>>;
  /** Headers a response of this route carries beyond those every response of its status carries (STATUS_HEADERS). */
  readonly responseHeaders?: Readonly<Record<number, Readonly<Record<string, ResponseHeader>>>>;
  readonly handler: (request: FastifyRequest<RouteInput<Schemas, Stream>>, reply: FastifyReply) => Promise<unknown>;
}

/**
 * A route whose handler's input is typed from its own schemas, as one of the app's routes. The one cast is sound:
 * Fastify calls the handler only with input its schemas validated (and the line stream only on a line-stream route).
 */
export function typedRoute<Schemas extends RouteSchemas, Stream extends LineStream | undefined = undefined>(spec: RouteSpec<Schemas, Stream>): RouteSpec {
  return spec as RouteSpec;
}

/** The OpenAPI spelling of a Fastify route URL (/plants/:id → /plants/{id}), the form clients read in the document. */
export function openApiPath(url: string): string {
  return url.replace(/:(\w+)/g, '{$1}');
}

export interface ResponseHeader {
  readonly description: string;
  readonly required: boolean;
  readonly schema: object;
}

/** Headers that every response carries, whatever its route and status. */
export const EVERY_RESPONSE_HEADERS: Readonly<Record<string, ResponseHeader>> = {
  'X-Request-Id': {
    description:
      "The request's id, as in every log line of the request (reqId): the request's own X-Request-Id when that is printable ASCII of at most 128 characters, otherwise one generated (a UUID)",
    required: true,
    schema: { type: 'string', maxLength: 128 },
  },
};

const RETRY_AFTER: ResponseHeader = { description: 'Seconds to wait before retrying', required: true, schema: { type: 'integer', minimum: 1 } };

/** Headers that every response of a status carries, whichever route answers it. */
export const STATUS_HEADERS: Readonly<Record<number, Readonly<Record<string, ResponseHeader>>>> = {
  401: {
    'WWW-Authenticate': {
      description:
        'RFC 6750 challenge: Bearer realm="plantstore", with error="invalid_token" for an unknown, revoked or expired token ' +
        '(an expired one also with error_description="the token has expired")',
      required: true,
      schema: { type: 'string' },
    },
  },
  403: {
    'WWW-Authenticate': {
      description: 'RFC 6750 §3.1 challenge naming the scope the operation needs: Bearer realm="plantstore", error="insufficient_scope", scope="plants:create"',
      required: true,
      schema: { type: 'string' },
    },
  },
  415: {
    'Accept-Encoding': {
      description: 'identity: sent when the body was refused for its Content-Encoding (RFC 9110 §15.5.16)',
      required: false,
      schema: { type: 'string' },
    },
  },
  429: {
    'Retry-After': RETRY_AFTER,
    'X-RateLimit-Limit': { description: 'The token bucket size (RATE_LIMIT_BURST)', required: false, schema: { type: 'integer' } },
    'X-RateLimit-Remaining': { description: 'Requests this token may still send at once', required: false, schema: { type: 'integer' } },
    'X-RateLimit-Reset': { description: 'Seconds until the next request is allowed (on a 429) or the bucket is full again', required: false, schema: { type: 'integer' } },
  },
  503: { 'Retry-After': RETRY_AFTER },
};

/** What each non-2xx status means in this service; the error table of docs/api.md says the same. */
export const ERROR_DESCRIPTIONS: Readonly<Record<number, string>> = {
  400: 'The request is invalid: no body where the operation takes one (none, Content-Length: 0, or a chunked body of no chunk), malformed JSON, a field that breaks the NewPlant schema (message names it), an id outside int64, a malformed Authorization header, or a path or query parameter that is not valid percent-encoded UTF-8.',
  401: 'No bearer token, another scheme, or an unknown, revoked or expired token. Carries WWW-Authenticate: Bearer realm="plantstore" (with error="invalid_token" for a bad token, and error_description="the token has expired" for an expired one).',
  403: 'The token is valid but lacks the scope this operation needs (see its security requirement); nothing was read or written. Carries WWW-Authenticate: Bearer error="insufficient_scope" with the scope.',
  404: 'No such resource.',
  406: 'The Accept header excludes every media type the operation answers (the event stream answers text/event-stream only).',
  405: 'The method is not allowed on this path; see the Allow header.',
  408: 'The request headers or body did not arrive in time (HEADERS_TIMEOUT_MS / REQUEST_TIMEOUT_MS); the connection is closed.',
  409: 'A plant with this id already exists with a different name or tag.',
  413: 'The request body is larger than the configured limit (BODY_LIMIT_BYTES, default 16384).',
  414: 'A path parameter is longer than 100 characters.',
  415: 'The request body is not application/json (or application/x-ndjson, where the operation takes it) in UTF-8, or carries a Content-Encoding other than identity.',
  429: 'The token has sent more requests than its rate limit allows, or the client address has failed authentication more often than AUTH_FAILURE_LIMIT allows (a request with a valid token is never refused for that); see Retry-After.',
  431: 'The request headers are larger than the configured limit (MAX_HEADER_BYTES, default 8192); the connection is closed.',
  500: 'An unexpected failure; details are logged, not sent.',
  503: 'Storage is unavailable or the write queue is full; see Retry-After.',
};

/**
 * Statuses answered before any route runs, so no route's schema lists them, yet a request to any operation can get
 * them: Node's HTTP server answers 408 (headers or body too slow) and 431 (header block too large) whatever the path,
 * and the router answers 414 for an over-long path parameter, which only a path with a parameter can have.
 */
export function statusesBeforeRouting(route: RouteSpec): readonly number[] {
  return route.schema.params ? [408, 414, 431] : [408, 431];
}
