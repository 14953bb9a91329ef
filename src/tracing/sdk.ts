/**
 * Tracing on OpenTelemetry's SDK: loaded by ./tracing.ts only when an OTLP endpoint is configured. The spans are made
 * here; how they reach the collector without holding up an answer (a bounded queue, dropped spans counted and
 * logged) is ./span-export.ts.
 */
import type { IncomingMessage } from 'node:http';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import {
  ATTR_DB_QUERY_TEXT,
  ATTR_DB_SYSTEM_NAME,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_URL_SCHEME,
  DB_SYSTEM_NAME_VALUE_POSTGRESQL,
} from '@opentelemetry/semantic-conventions';
import type { Logger } from 'pino';
import type { TracingConfig } from '../config/tracing.js';
import type { DeliverySpan, OpenSpan, QueuedWrites, TraceIds, Tracing } from './types.js';
import { SpanExport } from './span-export.js';

/** How long shutdown waits for the spans still queued to be exported. */
const SHUTDOWN_FLUSH_MS = 2000;

/** The server span's name for a request no route matched: one name, never its path. */
const UNMATCHED_SPAN_NAME = 'unmatched route';

const TRACER_NAME = 'plantstore';

function sampler(config: TracingConfig): Sampler {
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(config.samplerRatio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.samplerRatio) });
  }
}

/** The server span of a request and the context its children start in. */
interface RequestTrace {
  readonly span: Span;
  readonly context: Context;
}

/** A create waiting in the write queue: the context it was queued in and when. */
interface QueuedCreate {
  readonly context: Context;
  readonly queuedAt: number;
}

/** A traceparent header value for a span's context. */
function traceparentOf(propagator: W3CTraceContextPropagator, spanContext: Context): string | undefined {
  const carrier: Record<string, string> = {};
  propagator.inject(spanContext, carrier, defaultTextMapSetter);
  return carrier.traceparent;
}

function fail(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute(ATTR_ERROR_TYPE, error instanceof Error ? error.name : 'error');
}

export function createTracing(config: TracingConfig, log: Logger): Tracing {
  const spanExport = new SpanExport(config, log);
  const provider = new TracerProvider({
    sampler: sampler(config),
    resource: defaultResource().merge(resourceFromAttributes({ ...config.resourceAttributes, [ATTR_SERVICE_NAME]: config.serviceName })),
    spanProcessors: [spanExport.processor],
  });
  // The context manager carries the active span through awaits (a handler's queued write, its queries); it is the
  // API's global one, so it is set once per thread.
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  const tracer = provider.getTracer(TRACER_NAME);
  const propagator = new W3CTraceContextPropagator();

  const requests = new WeakMap<IncomingMessage, RequestTrace>();
  const queued = new WeakMap<object, QueuedCreate>();

  const traceIdsOf = (span: Span): TraceIds => {
    const { traceId, spanId } = span.spanContext();
    return { trace_id: traceId, span_id: spanId };
  };

  return {
    startRequest(request, scheme) {
      const parent = request.headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
      const span = tracer.startSpan(
        request.method ?? 'HTTP',
        { kind: SpanKind.SERVER, attributes: { [ATTR_HTTP_REQUEST_METHOD]: request.method ?? '_OTHER', [ATTR_URL_SCHEME]: scheme } },
        parent,
      );
      if (!span.isRecording()) return undefined;
      requests.set(request, { span, context: trace.setSpan(parent, span) });
      return traceIdsOf(span);
    },

    endRequest(request, route, status) {
      const traced = requests.get(request);
      if (!traced) return;
      requests.delete(request);
      const { span } = traced;
      span.updateName(route === undefined ? UNMATCHED_SPAN_NAME : `${request.method} ${route}`);
      if (route !== undefined) span.setAttribute(ATTR_HTTP_ROUTE, route);
      if (status === null) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute(ATTR_ERROR_TYPE, 'aborted');
      } else span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (status !== null && status >= 500) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute(ATTR_ERROR_TYPE, String(status));
      }
      span.end();
    },

    child(request, name) {
      const traced = requests.get(request);
      if (!traced) return undefined;
      const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL }, traced.context);
      return {
        end(error?: unknown) {
          if (error !== undefined) fail(span, error);
          span.end();
        },
      } satisfies OpenSpan;
    },

    within(request, work) {
      const traced = requests.get(request);
      return traced ? context.with(traced.context, work) : work();
    },

    queued(plant) {
      const active = context.active();
      if (trace.getSpan(active)?.isRecording()) queued.set(plant, { context: active, queuedAt: Date.now() });
    },

    traceCreates(plants, fsync) {
      // `given`: the traceparents of plants another thread traced and handed over (WriteQueue.createBatch), aligned
      // with the batch; this thread's own traced creates are found in `queued`.
      const create: QueuedWrites['create'] = async (batch, given) => {
        const commits: Span[] = [];
        const traceparents: (string | undefined)[] = [];
        let first: Context | undefined;
        for (let index = 0; index < batch.length; index += 1) {
          const plant = batch[index] as (typeof batch)[number];
          const waiting = queued.get(plant);
          if (!waiting) {
            traceparents.push(given?.[index]);
            continue;
          }
          queued.delete(plant);
          tracer.startSpan('write queue wait', { kind: SpanKind.INTERNAL, startTime: waiting.queuedAt }, waiting.context).end();
          const commit = tracer.startSpan('commit', { kind: SpanKind.INTERNAL, attributes: { 'plantstore.batch.size': batch.length, 'plantstore.batch.fsync': fsync } }, waiting.context);
          commits.push(commit);
          first ??= trace.setSpan(waiting.context, commit);
          // The webhook events this create writes continue its request's trace.
          traceparents.push(traceparentOf(propagator, waiting.context));
        }
        if (commits.length === 0) return given === undefined ? plants.create(batch) : plants.create(batch, given);
        try {
          // The batch's queries (PostgreSQL) run in the first traced create's commit span.
          const outcomes = await context.with(first as Context, () => plants.create(batch, traceparents));
          for (const commit of commits) commit.end();
          return outcomes;
        } catch (error) {
          for (const commit of commits) {
            fail(commit, error);
            commit.end();
          }
          throw error;
        }
      };
      return { create, delete: (id) => plants.delete(id) };
    },

    async query(text, run) {
      const parent = context.active();
      if (!trace.getSpan(parent)?.isRecording()) return run();
      const operation = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? 'QUERY';
      const span = tracer.startSpan(
        `${operation} postgresql`,
        // The text has placeholders ($1): parameter values (plant names, token hashes) are never recorded.
        { kind: SpanKind.CLIENT, attributes: { [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_POSTGRESQL, [ATTR_DB_QUERY_TEXT]: text } },
        parent,
      );
      try {
        return await context.with(trace.setSpan(parent, span), run);
      } catch (error) {
        fail(span, error);
        throw error;
      } finally {
        span.end();
      }
    },

    delivery(traceparent, target) {
      if (traceparent === undefined) return undefined;
      const parent = propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
      if (trace.getSpan(parent) === undefined) return undefined;
      let address: URL;
      try {
        address = new URL(target.url);
      } catch {
        return undefined;
      }
      // Host, port and scheme only: a subscription URL's path or query may hold a secret.
      const span = tracer.startSpan(
        'POST webhook',
        {
          kind: SpanKind.CLIENT,
          attributes: {
            [ATTR_HTTP_REQUEST_METHOD]: 'POST',
            [ATTR_URL_SCHEME]: address.protocol.replace(':', ''),
            [ATTR_SERVER_ADDRESS]: address.hostname,
            [ATTR_SERVER_PORT]: Number(address.port) || (address.protocol === 'https:' ? 443 : 80),
            'plantstore.webhook.subscription': target.subscription,
            'plantstore.webhook.attempt': target.attempt,
          },
        },
        parent,
      );
      const spanContext = trace.setSpan(parent, span);
      return {
        traceparent: traceparentOf(propagator, spanContext) ?? traceparent,
        end(status, error) {
          if (status !== null) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
          if (status === null || status >= 400) {
            span.setStatus({ code: SpanStatusCode.ERROR });
            span.setAttribute(ATTR_ERROR_TYPE, status === null ? (error ?? 'error') : String(status));
          }
          span.end();
        },
      } satisfies DeliverySpan;
    },

    async shutdown() {
      spanExport.stopReporting();
      // What is queued gets SHUTDOWN_FLUSH_MS to reach the collector: a collector that hangs must not hold the
      // shutdown (SHUTDOWN_TIMEOUT_MS bounds all of it) for an export's whole time limit.
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), SHUTDOWN_FLUSH_MS);
        timer.unref();
      });
      const flushed = provider.shutdown().then(
        () => 'flushed' as const,
        (error: unknown) => {
          log.warn({ err: error }, 'tracing did not shut down cleanly');
          return 'failed' as const;
        },
      );
      const outcome = await Promise.race([flushed, gaveUp]);
      clearTimeout(timer);
      spanExport.reportLast(outcome === 'timeout');
      context.disable();
    },
  };
}
