/**
 * What the rest of the service knows of a tracer (./tracing.ts re-exports it): the SDK's implementation (./sdk.ts)
 * imports these from here rather than from ./tracing.ts, which loads it, so that the two make no import circle.
 */
import type { IncomingMessage } from 'node:http';
import type { PlantStore } from '../storage/plant-store.js';

/** A span begun and not yet ended. */
export interface OpenSpan {
  /** Ends it; an error marks it failed (its class name, never its message, which may quote input). */
  end(error?: unknown): void;
}

/** The ids a request's log lines carry, as the OpenTelemetry log data model names them. */
export interface TraceIds {
  readonly trace_id: string;
  readonly span_id: string;
}

/** A webhook delivery attempt's span: the traceparent header it sends, and its end with the subscriber's answer. */
export interface DeliverySpan {
  readonly traceparent: string;
  end(status: number | null, error: string | null): void;
}

/** The parts of a plant store the write queue calls. */
export type QueuedWrites = Pick<PlantStore, 'create' | 'delete'>;

export interface Tracing {
  /**
   * Begins the server span of a request (its parent an incoming `traceparent`, if any) and returns the ids its log
   * lines carry; undefined when the sampler drops it, and then nothing else is done for the request.
   */
  startRequest(request: IncomingMessage, scheme: string): TraceIds | undefined;
  /**
   * Ends a request's server span: named by its route template (undefined: no route matched) and its status (null:
   * the client went away before the answer).
   */
  endRequest(request: IncomingMessage, route: string | undefined, status: number | null): void;
  /** A child span of a request's server span, or undefined when the request is not traced. */
  child(request: IncomingMessage, name: string): OpenSpan | undefined;
  /** Runs `work` with the request's span as the active one, so what it starts (a queued write, a query) joins the trace. */
  within<T>(request: IncomingMessage, work: () => T): T;
  /** A create entered the write queue (called with the request's span active): its wait starts now. */
  queued(plant: object): void;
  /** The store the write queue commits to, its creates traced: the wait ends and a commit span starts per traced create. */
  traceCreates(plants: QueuedWrites, fsync: boolean): QueuedWrites;
  /** A PostgreSQL statement, a client span when run inside a traced request. */
  query<T>(text: string, run: () => Promise<T>): Promise<T>;
  /** A webhook delivery attempt of an event created in the trace `traceparent` names; undefined when it has none. */
  delivery(traceparent: string | undefined, target: { readonly url: string; readonly subscription: string; readonly attempt: number }): DeliverySpan | undefined;
  /** Exports what is queued (within a bound) and stops. */
  shutdown(): Promise<void>;
}
