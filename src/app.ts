import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { toErrorReply } from './http/error-reply.js';
import { fastifyOptions } from './http/fastify-options.js';
import { API_REFERENCE_PATH, apiReference } from './http/plugins/api-reference.js';
import { newPlantReader } from './http/new-plant.js';
import { buildOpenApi, newPlantWebhook } from './http/openapi.js';
import { authentication, presentedToken } from './http/plugins/authentication.js';
import { bodyParsers } from './http/plugins/body-parsers.js';
import { errorHandler, errorReplier } from './http/plugins/error-handler.js';
import { methodNotAllowed } from './http/plugins/method-not-allowed.js';
import { requestChecks } from './http/plugins/request-checks.js';
import { requestTiming } from './http/plugins/request-timing.js';
import { requestTracing, tracedLogger } from './http/plugins/request-tracing.js';
import { lazyRequestLogger } from './http/request-logger.js';
import { routeSpecs } from './http/plugins/route-specs.js';
import { tokenRateLimit } from './http/plugins/token-rate-limit.js';
import type { BucketCells } from './http/rate-limit.js';
import { endFailedHandshakes, type TlsCredentials } from './http/tls.js';
import { RefusalLog } from './http/refusal-log.js';
import type { RouteSpec } from './http/route-spec.js';
import { EventStreams } from './http/event-stream.js';
import { StreamLimits } from './http/stream-limits.js';
import { eventRoutes } from './routes/events.js';
import { plantRoutes, type BulkCreateSettings } from './routes/plants.js';
import { systemRoutes } from './routes/system.js';
import { ErrorRecord, plantSchemas } from './schemas.js';
import type { Services } from './services.js';

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
  /** Called as each streamed bulk create begins; the function it returns, as the stream ends (src/serve/old-generation.ts). */
  readonly whileBulkStreaming?: () => () => void;
}

/**
 * Builds the whole HTTP application on the services (src/services.ts), logging with their logger. It never
 * listens (src/serve/server.ts does that) and owns nothing it must close: the services' owner closes them. Each concern
 * is a plugin of src/http/plugins/, registered in the order their hooks run.
 */
export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const { config, metrics, tracing } = services;
  const refusals = new RefusalLog(services.log as FastifyBaseLogger);
  const replyWithError = errorReplier({ bodyLimit: config.limits.bodyBytes, refusals });
  // Each request's logger is made when it first logs at a level that prints (src/http/request-logger.ts). Tracing
  // (src/tracing/): the request's server span begins with its logger, so every line it logs, the first included,
  // carries trace_id and span_id.
  const childLogger = tracing ? tracedLogger(tracing, options.tls ? 'https' : 'http') : lazyRequestLogger;
  const app = Fastify(fastifyOptions(services, options.tls, replyWithError, childLogger));
  endFailedHandshakes(app);
  if (tracing) await app.register(requestTracing, { tracing });
  await app.register(bodyParsers, { bodyLimit: config.limits.bodyBytes });
  await app.register(errorHandler, { bodyLimit: config.limits.bodyBytes, refusals });
  // Closing the app stops every streamed bulk create reading (each ends with a 503 line once its lines read are
  // answered): preClose runs before Fastify waits for the requests in flight, which a stream would otherwise keep up.
  const stopping = new AbortController();
  app.addHook('preClose', (done) => {
    stopping.abort();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    refusals.stop();
    done();
  });
  // The one onRequest hook every request runs: its id on every answer, then the refusals that need no route.
  await app.register(requestChecks);
  await app.register(authentication, {
    tokens: services.tokens,
    metrics,
    tracing,
    failureLimit: config.authFailureLimit,
    threads: config.workers,
    now: options.now,
  });
  await app.register(tokenRateLimit, { config: config.rateLimit, now: options.now, cells: options.rateLimitCells });

  const schemas = plantSchemas(config.limits);
  const bulk: BulkCreateSettings = {
    maxLineBytes: config.limits.bodyBytes,
    maxLines: config.bulk.maxLines,
    window: config.bulk.window,
    idleTimeoutMs: config.http.requestTimeoutMs,
    // The single create's parser and NewPlant validation, line by line; a field is named as a single create names it
    // ("body.name must ..."), the text as a whole as the line ("line is not valid JSON").
    readPlant: newPlantReader(config.limits, 'line'),
    errorRecord: (error, request) => toErrorReply(error, request.log, config.limits.bodyBytes, refusals).body,
    stopping: stopping.signal,
    watchToken: (request, onRefused) => services.tokens.watch(presentedToken(request), 'plants:create', onRefused),
    ...(app.tokenRateLimit ? { admitLine: app.tokenRateLimit.admitLine } : {}),
    ...(options.whileBulkStreaming ? { whileStreaming: options.whileBulkStreaming } : {}),
  };
  // The change feed's streams (GET /plants/events): ended first when the app closes, so that a shutdown is not held
  // up by them (the clients resume elsewhere); their limits count this thread's streams (docs/configuration.md).
  const streams = new EventStreams(services.feed, {
    bufferBytes: config.feed.streamBufferBytes,
    heartbeatMs: config.feed.heartbeatMs,
    observer: metrics ?? undefined,
    onError: (error) => services.log.warn({ err: error }, 'an event stream failed; its client resumes from its last event id'),
  });
  app.addHook('preClose', (done) => {
    streams.closeAll();
    done();
  });
  const streamLimits = new StreamLimits(config.feed.streamsPerToken, config.feed.streamsPerAddress);
  const routes: RouteSpec[] = [
    // Before /plants/:id, so that the document lists it beside the collection; the router prefers the static path anyway.
    ...eventRoutes(streams, streamLimits, (request, onRefused) => services.tokens.watch(presentedToken(request, true), 'plants:read', onRefused)),
    ...plantRoutes(schemas, services.plants, bulk),
    // The document describes every route, itself included, so it is built after the list and read lazily.
    ...systemRoutes(services.readiness, () => (openApiJson ??= JSON.stringify(openApi)), metrics),
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

  await app.register(requestTiming, { metrics, routes });
  await app.register(routeSpecs, { routes, tracing });
  await app.register(methodNotAllowed, { routes });
  // No token, no rate limit: the page and its assets are public, like /openapi.json itself.
  await app.register(apiReference, { document: openApi });
  return app;
}
