import { Type } from 'typebox';
import type { Readiness } from '../health/readiness.js';
import type { RouteSpec } from '../http/route-spec.js';
import type { Metrics } from '../observability/metrics.js';
import { ErrorRecord } from '../schemas.js';

const Status = Type.Object({ status: Type.String() }, { additionalProperties: false });

const Links = Type.Object(
  {
    docs: Type.String({ description: 'The API documentation, for people' }),
    openapi: Type.String({ description: 'The OpenAPI document, for programs' }),
  },
  { additionalProperties: false },
);

export function systemRoutes(readiness: Readiness, openApiJson: () => string, metrics: Metrics | null): RouteSpec[] {
  return [
    {
      method: 'GET',
      url: '/',
      operationId: 'root',
      summary: 'Where the API is described',
      description: 'Links to the documentation and to this document, so that a look at the root is not a bare 404.',
      scope: null,
      schema: { response: { 200: Links } },
      handler: async () => ({ docs: '/docs', openapi: '/openapi.json' }),
    },
    {
      method: 'GET',
      url: '/healthz',
      operationId: 'health',
      summary: 'Liveness: the process is up',
      scope: null,
      schema: { response: { 200: Status } },
      handler: async () => ({ status: 'ok' }),
    },
    {
      method: 'GET',
      url: '/readyz',
      operationId: 'ready',
      summary: 'Readiness: storage takes writes',
      description:
        'Answers 200 once a one-row heartbeat write has been committed durably. Answers 503 when that write fails ' +
        '(database down, disk full, file locked past 1 s, read-only, SQLite WAL not being checkpointed) or when storage refused the latest batch of creates, or part of it, ' +
        'within the last 5 s and none has committed since; it turns 200 again by itself once the cause goes away. A successful ' +
        'heartbeat answers every probe for 250 ms.',
      scope: null,
      schema: { response: { 200: Status, 503: ErrorRecord } },
      handler: async () => {
        await readiness.check();
        return { status: 'ready' };
      },
    },
    {
      method: 'GET',
      url: '/openapi.json',
      operationId: 'openapi',
      summary: 'This OpenAPI 3.1 document',
      scope: null,
      schema: { response: { 200: null } },
      handler: async (_request, reply) => {
        reply.type('application/json; charset=utf-8');
        return openApiJson();
      },
    },
    ...(metrics ? [metricsRoute(metrics)] : []),
  ];
}

/**
 * Present unless METRICS=off. It needs a token with the metrics:read scope: unauthenticated, a flood of scrapes took
 * the CPU creates needed, and a failed authentication is cheap and throttled. The text is rendered at most once per
 * METRICS_CACHE_MS however often it is asked for, and sent as the same bytes until the next render.
 */
function metricsRoute(metrics: Metrics): RouteSpec {
  // The text's bytes, encoded once per render rather than measured and encoded again for every scrape of it.
  let encoded: { readonly text: string; readonly body: Buffer } | undefined;
  return {
    method: 'GET',
    url: '/metrics',
    operationId: 'metrics',
    summary: 'Prometheus metrics',
    description:
      'Process and runtime metrics, http_request_duration_seconds and the service\'s own plantstore_* metrics, in the ' +
      'Prometheus text exposition format 0.0.4, rendered at most once per METRICS_CACHE_MS (1 s by default). Needs a ' +
      'token with the metrics:read scope. Absent (404) when the service runs with METRICS=off.',
    scope: 'metrics:read',
    schema: { response: { 200: null, 400: ErrorRecord, 401: ErrorRecord, 403: ErrorRecord, 429: ErrorRecord } },
    responseMediaTypes: { 200: 'text/plain' },
    handler: async (_request, reply) => {
      reply.type(metrics.contentType);
      const text = await metrics.render();
      if (encoded?.text !== text) encoded = { text, body: Buffer.from(text) };
      return encoded.body;
    },
  };
}
