import { METHODS as NODE_METHODS, type IncomingMessage } from 'node:http';
import rateLimit from '@fastify/rate-limit';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
  type HTTPMethods,
  type onResponseHookHandler,
} from 'fastify';
import { ExpiredTokenError, InvalidTokenError, MissingScopeError } from './auth/errors.js';
import type { Scope } from './auth/scopes.js';
import { readBearerToken, singleAuthorization } from './http/bearer.js';
import { MalformedCredentialsError, MethodNotAllowedError, NotFoundError, TooManyRequestsError, UnauthorizedError, UnsupportedMediaTypeError } from './http/errors.js';
import { framingProblem, httpServer } from './http/http-server.js';
import { describeValidationError, toErrorReply, writeClientError } from './http/error-reply.js';
import { checkContentEncoding, checkJsonMediaType, parseJsonBody } from './http/json-body.js';
import { API_REFERENCE_PATH, registerApiReference } from './http/api-reference.js';
import { STRICT_AJV_OPTIONS, newPlantReader } from './http/new-plant.js';
import { buildOpenApi, newPlantWebhook } from './http/openapi.js';
import { AuthFailureThrottle, LocalBucketCells, TokenBucketStore, tokenBucketStore, type BucketCells } from './http/rate-limit.js';
import { LineStreamBody, NDJSON } from './http/ndjson.js';
import { endFailedHandshakes, withTls, type TlsCredentials } from './http/tls.js';
import { QUERY_ERROR, parseQueryString, type ParsedQuery } from './http/query-string.js';
import { REQUEST_ID_HEADER, requestIdOf } from './http/request-id.js';
import { openApiPath, type RouteSpec } from './http/route-spec.js';
import { UNMATCHED_ROUTE } from './metrics.js';
import { plantRoutes, type BulkCreateSettings } from './routes/plants.js';
import { systemRoutes } from './routes/system.js';
import { ErrorRecord, plantSchemas } from './schemas.js';
import type { Services } from './services.js';
import { activeTracing, type Tracing } from './tracing/tracing.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route takes a line-stream body beside JSON (RouteSpec.lineStream): the NDJSON parser hands it the stream. */
    lineStream?: boolean;
  }
  interface FastifyRequest {
    /** Name of the token that authenticated this request; '' before authentication. */
    tokenName: string;
  }
}

/**
 * Every method Node's parser takes (it refuses others as malformed): a known path answers the ones it does not take
 * with 405 and Allow, an unknown path with 404, whatever the method.
 */
const METHODS = NODE_METHODS as readonly HTTPMethods[];

/**
 * Per-request lines at info would cost more than a create itself; they are logged at debug instead, with the
 * request's headers (what an operator debugging a client needs), every credential-bearing one redacted by the
 * logger's `headers` serializer (redactCredentialHeaders).
 */
class DebugRequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request, headers: request.headers }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    request.log.debug({ res: reply, err: error ?? undefined, responseTime: reply.elapsedTime }, 'request completed');
  }
}

export interface AppOptions {
  /** The clock, in milliseconds, that rate-limit buckets refill by (performance.now); tests pass one they advance by hand. */
  readonly now?: () => number;
  /** Given, the server speaks HTTPS only, with this certificate chain and key (read by src/http/tls.ts). */
  readonly tls?: TlsCredentials;
  /**
   * Where rate-limit buckets are kept: this app's own by default; in a worker thread of an instance, memory every
   * worker shares (src/workers/), with `now` a clock they share, so that the limit is per token per instance.
   */
  readonly rateLimitCells?: BucketCells;
}

/**
 * Builds the whole HTTP application on the services (src/services.ts), logging with their logger. It never
 * listens (src/server.ts does that) and owns nothing it must close: the services' owner closes them.
 */
export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const { config } = services;
  const tracing = activeTracing();
  const replyWithError = (error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const { status, headers, body } = toErrorReply(error, request.log, config.limits.bodyBytes);
    // Answered before its body was read (401, 404, 405, 429 at onRequest; 413 part-way): kept alive, the connection
    // would have Node read and discard the rest however large, and a body that stalls would earn a second answer (408).
    if (hasUnreadBody(request.raw)) reply.header('connection', 'close');
    return reply.code(status).headers(headers).type('application/json').send(body);
  };
  const app = Fastify(withTls({
    loggerInstance: services.log as FastifyBaseLogger,
    bodyLimit: config.limits.bodyBytes,
    routerOptions: { querystringParser: parseQueryString },
    logController: new DebugRequestLog(),
    // Every log line of a request carries it as reqId; every response carries it back (the first onRequest hook).
    genReqId: requestIdOf,
    serverFactory: (handler) => httpServer(handler, config.http, services.log as FastifyBaseLogger, options.tls, config.workers),
    // Fastify's 503-on-close body is not an Error record; in-flight requests finish and new ones are refused by the closed listener.
    return503OnClosing: false,
    // The contract forbids silently changing data; `plantstore import` compiles NewPlant with the same options.
    ajv: { customOptions: { ...STRICT_AJV_OPTIONS } },
    schemaErrorFormatter: describeValidationError,
    clientErrorHandler: writeClientError,
    // Errors the router raises before any route or error handler (a path that is not valid percent-encoded UTF-8,
    // an over-long path parameter) would otherwise get Fastify's own body instead of an Error record. No hook runs
    // for them, so they are given the request id here.
    frameworkErrors: (error, request, reply) => replyWithError(error, request, reply.header(REQUEST_ID_HEADER, request.id)),
    // request.ip (the remoteAddress of request log lines), .protocol and .host follow X-Forwarded-* only from these.
    trustProxy: config.trustProxy.length > 0 ? [...config.trustProxy] : false,
    // Tracing (src/tracing/): the request's server span begins with its logger, so every line it logs, the first
    // included, carries trace_id and span_id. With tracing off the option is left at Fastify's default.
    ...(tracing ? { childLoggerFactory: tracedLogger(tracing, options.tls ? 'https' : 'http') } : {}),
  }, options.tls));
  endFailedHandshakes(app);
  if (tracing) traceRequests(app, tracing);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // Many clients send Content-Type on every request: an empty body is only an error where a body is expected.
    if ((body as Buffer).length === 0 && !request.routeOptions.schema?.body) {
      done(null, undefined);
      return;
    }
    try {
      checkContentEncoding(request.headers['content-encoding']);
      checkJsonMediaType(request.headers['content-type'] ?? '');
      done(null, parseJsonBody(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  // A streamed bulk create (POST /plants as NDJSON): the body is not read here but handed to the route as the stream it
  // is, read line by line as lines commit (src/http/ndjson.ts). Only routes that say they take it (lineStream) do.
  app.addContentTypeParser(NDJSON, (request, payload, done) => {
    try {
      if (request.routeOptions.config.lineStream !== true) {
        throw new UnsupportedMediaTypeError('Content-Type must be application/json');
      }
      checkContentEncoding(request.headers['content-encoding']);
      checkJsonMediaType(request.headers['content-type'] ?? '');
      done(null, new LineStreamBody(payload as IncomingMessage));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  app.setErrorHandler(replyWithError);
  // The first hook of every routed request, so every answer carries it: a header set now stays through the error
  // handler, and so is also on the errors decided at onRequest (404, 405, 401, 429) and after it (400, 413, 415, 500).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    done();
  });
  // What Node would answer itself, with an empty body, is answered here as an Error record (the server is made to
  // hand these requests over: httpServer), before the route and before the body is read.
  app.addHook('onRequest', (request, reply, done) => {
    const problem = framingProblem(request.raw);
    if (problem) reply.header('connection', 'close');
    done(problem);
  });
  const notFound = (request: FastifyRequest) => new NotFoundError(`no route for ${request.method} ${request.url.split('?')[0]}`);
  // A 404 is decided by the path alone, so it is answered at onRequest: the not-found handler would run only after
  // the body had been read and parsed, turning a POST to an unknown path into a 400, 413 or 415.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.is404) done(notFound(request));
    else done();
  });
  app.addHook('preValidation', (request, _reply, done) => {
    const error = (request.query as ParsedQuery)[QUERY_ERROR];
    if (error) done(error);
    else done();
  });
  app.setNotFoundHandler(async (request) => {
    throw notFound(request);
  });
  app.decorateRequest('tokenName', '');

  const schemas = plantSchemas(config.limits);
  // Rate-limit buckets: the plugin's store and the per-line admission of streamed bulk creates share them.
  const bucketCells = options.rateLimitCells ?? new LocalBucketCells();
  const bulk: BulkCreateSettings = {
    maxLineBytes: config.limits.bodyBytes,
    maxLines: config.bulk.maxLines,
    window: config.bulk.window,
    idleTimeoutMs: config.http.requestTimeoutMs,
    // The single create's parser and NewPlant validation, line by line; messages name the line ("line.name must ...").
    readPlant: newPlantReader(config.limits, 'line'),
    errorRecord: (error, request) => toErrorReply(error, request.log, config.limits.bodyBytes).body,
    ...(config.rateLimit ? { admitLine: lineAdmission(new TokenBucketStore(config.rateLimit, options.now, bucketCells), config.rateLimit.burst) } : {}),
  };
  const routes: RouteSpec[] = [
    ...plantRoutes(schemas, services.plants, bulk),
    // The document describes every route, itself included, so it is built after the list and read lazily.
    ...systemRoutes(services.readiness, () => (openApiJson ??= JSON.stringify(openApi)), services.metrics),
  ];
  // The reference page is documentation of the API, not an operation of it (it answers HTML for people, and its
  // routes belong to the Swagger UI plugin, not to a RouteSpec): the document links to it instead of listing it.
  // Serialized once: the document never changes while the process runs, and it is the largest public answer.
  let openApiJson: string | undefined;
  const openApi = buildOpenApi(
    routes,
    { NewPlant: schemas.NewPlant, Plant: schemas.Plant, StoredPlant: schemas.StoredPlant, BulkCreateResult: schemas.BulkCreateResult, Error: ErrorRecord },
    { externalDocs: { description: 'Interactive reference: this document, rendered', url: API_REFERENCE_PATH }, webhooks: newPlantWebhook() },
  );

  // --- Failed authentication, throttled per client address (AUTH_FAILURE_LIMIT) and counted. Only failures take
  // from an address's bucket and only a failure is refused for it (429, Retry-After): a valid token is answered
  // whatever others behind the same address (a proxy, a NAT) got wrong. Per thread, each its share of the limit.
  const { metrics } = services;
  const authFailures = config.authFailureLimit ? new AuthFailureThrottle(Math.max(1, Math.ceil(config.authFailureLimit / config.workers)), options.now) : null;
  const refused = (error: unknown, request: FastifyRequest): unknown => {
    const isFailure =
      error instanceof InvalidTokenError || error instanceof ExpiredTokenError || error instanceof MissingScopeError ||
      error instanceof UnauthorizedError || error instanceof MalformedCredentialsError;
    if (!isFailure) return error;
    const retryAfter = authFailures?.failed(request.ip);
    metrics?.authenticationFailed(retryAfter === undefined ? 'refused' : 'throttled');
    return retryAfter === undefined ? error : new TooManyRequestsError(retryAfter, 'too many failed authentications from this address');
  };
  // --- end of failed authentication

  // Each route checks the token for its own scope: one closure per route, made here, none per request.
  const authenticateFor = (scope: Scope) => async (request: FastifyRequest) => {
    // Runs at onRequest, before the body is read: an unauthenticated caller learns nothing about validation, and a
    // token without the scope (403) cannot make the server read or parse a body either.
    const span = tracing?.child(request.raw, 'authenticate');
    try {
      request.tokenName = await services.tokens.authenticate(readBearerToken(singleAuthorization(request.raw.rawHeaders)), scope);
    } catch (error) {
      span?.end(error);
      throw refused(error, request);
    }
    span?.end();
  };
  // Per-token rate limiting, off unless RATE_LIMIT_MAX is set: it runs after authentication (keyed by the token's
  // name) and before the body is read, so a limited client costs no parsing; 429 is an Error record with Retry-After.
  const rateLimitHooks: Array<(request: FastifyRequest, reply: FastifyReply) => Promise<void>> = [];
  if (config.rateLimit) {
    await app.register(rateLimit, {
      global: false,
      // The bucket decides; the plugin compares its answer with the burst and sends the headers and the 429.
      store: tokenBucketStore(config.rateLimit, options.now, bucketCells),
      max: config.rateLimit.burst,
      timeWindow: config.rateLimit.windowMs,
      keyGenerator: (request) => request.tokenName,
      errorResponseBuilder: (_request, context) => new TooManyRequestsError(Math.max(1, Math.ceil(context.ttl / 1000))),
    });
    rateLimitHooks.push(app.rateLimit() as unknown as (request: FastifyRequest, reply: FastifyReply) => Promise<void>);
  }
  // http_request_duration_seconds: each route times its own requests under its OpenAPI path, so the hot path looks
  // nothing up; a request no route matched is timed under one fixed label, never its path, and a method no route
  // takes under one fixed method label (the 405 routes take every method Node parses).
  const routedMethods = new Set(routes.flatMap((route) => (route.method === 'GET' ? ['GET', 'HEAD'] : [route.method])));
  const timed = (url: string): { onResponse?: onResponseHookHandler } => {
    if (!metrics) return {};
    const durations = metrics.route(openApiPath(url), routedMethods);
    return {
      onResponse: (request, reply, done) => {
        durations.observe(request.method, reply.statusCode, reply.elapsedTime / 1000);
        done();
      },
    };
  };
  if (metrics) {
    const unmatched = metrics.route(UNMATCHED_ROUTE, routedMethods);
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) unmatched.observe(request.method, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });
  }
  const allowedByUrl = new Map<string, HTTPMethods[]>();
  for (const method of METHODS) if (!app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });
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
      ...(route.scope ? { onRequest: [authenticateFor(route.scope), ...rateLimitHooks] } : {}),
      ...timed(route.url),
      handler: tracing ? withTrace(tracing, route.handler) : route.handler,
    });
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
      onRequest: (request, _reply, done) => done(notAllowed(request)),
      ...timed(url),
      // Never reached (onRequest always answers); Fastify requires a handler.
      handler: async (request) => {
        throw notAllowed(request);
      },
    });
  }
  // No token, no rate limit: the page and its assets are public, like /openapi.json itself.
  await registerApiReference(app, openApi);
  return app;
}

/**
 * Rate limiting of a streamed bulk create: besides the request itself (counted at onRequest like any), each line
 * takes one token of the same bucket; when the bucket is empty the stream waits for the next token (reading pauses)
 * rather than refusing the line, so a bulk stream creates at the token's rate and no faster.
 */
function lineAdmission(bucket: TokenBucketStore, burst: number): NonNullable<BulkCreateSettings['admitLine']> {
  return (request) =>
    new Promise<void>((resolve, reject) => {
      const attempt = () =>
        bucket.incr(request.tokenName, (error, result) => {
          if (error) reject(error);
          else if (result && result.current > burst) setTimeout(attempt, Math.max(1, result.ttl));
          else resolve();
        });
      attempt();
    });
}

/** Each request's logger, made as Fastify makes it, once the request's server span has begun: it carries its ids. */
function tracedLogger(tracing: Tracing, scheme: string): FastifyServerOptions['childLoggerFactory'] {
  return function childLogger(this: FastifyInstance, logger, bindings, childOptions, raw) {
    const ids = tracing.startRequest(raw as IncomingMessage, scheme);
    return logger.child(ids ? { ...bindings, ...ids } : bindings, childOptions);
  };
}

/** Ends each request's server span with its answer (or its abort), named by its route template, never its path. */
function traceRequests(app: FastifyInstance, tracing: Tracing): void {
  const routeOf = (request: FastifyRequest) => (request.is404 || !request.routeOptions.url ? undefined : openApiPath(request.routeOptions.url));
  app.addHook('onResponse', (request, reply, done) => {
    tracing.endRequest(request.raw, routeOf(request), reply.statusCode);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    // No answer was sent: the client went away before it.
    tracing.endRequest(request.raw, routeOf(request), null);
    done();
  });
}

/** A route handler run with its request's span active, so the write it queues and the queries it makes join the trace. */
function withTrace(tracing: Tracing, handler: RouteSpec['handler']): RouteSpec['handler'] {
  return function traced(this: FastifyInstance, request, reply) {
    return tracing.within(request.raw, () => handler.call(this, request, reply));
  } as RouteSpec['handler'];
}

/** A request that declared a body (a length or chunked encoding) not yet read to its end. */
function hasUnreadBody(request: IncomingMessage): boolean {
  if (request.complete) return false;
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Statuses documented without a schema are sent as they are. */
function withoutNulls(response: RouteSpec['schema']['response']): Record<number, object> {
  return Object.fromEntries(Object.entries(response).filter(([, schema]) => schema !== null)) as Record<number, object>;
}
