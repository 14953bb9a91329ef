/**
 * The export path of the tracing SDK (./sdk.ts): how ended spans reach the collector, within bounds.
 *
 * Exporting never holds up an answer: spans end into a BatchSpanProcessor whose queue is bounded (EXPORT_LIMITS),
 * exported in the background by one OTLP/HTTP exporter with at most two requests in flight, each with a time limit.
 * A collector that is down, refuses or hangs fills the queue and spans beyond it are dropped and counted; the counts
 * are logged at most once a minute.
 */
import { TraceFlags, type Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor, type ReadableSpan, type Span as SdkSpan, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import type { TracingConfig } from '../config/tracing.js';

/**
 * The bounds of the export path. At most QUEUE spans wait (a span with its attributes is well under 1 KiB, so about
 * 2 MiB), plus at most IN_FLIGHT requests of BATCH spans each being sent; everything beyond is dropped and counted.
 */
const EXPORT_LIMITS = {
  /** Spans waiting for export at most (the processor's maxQueueSize). */
  queue: 2048,
  /** Spans per export request. */
  batch: 512,
  /** How long a span may wait before its batch is sent when fewer than `batch` are waiting. */
  delayMs: 1000,
  /** One export request's time limit. */
  timeoutMs: 10_000,
  /** Export requests in flight at once. */
  inFlight: 2,
} as const;

/** How often the count of dropped spans is logged at most. */
const DROP_REPORT_MS = 60_000;

/** Counts what never reached the collector: spans dropped at the full queue, spans in failed export requests. */
class ExportCounts {
  /** Spans handed to the batch processor and not yet taken by an export. */
  waiting = 0;
  /** Spans in export requests the collector has not answered yet. */
  sending = 0;
  dropped = 0;
  failed = 0;
}

/** The exporter, counting the spans it takes off the queue and those whose export failed. */
class CountingExporter implements SpanExporter {
  constructor(readonly inner: SpanExporter, readonly counts: ExportCounts) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.counts.waiting -= spans.length;
    this.counts.sending += spans.length;
    this.inner.export(spans, (result) => {
      this.counts.sending -= spans.length;
      if (result.code !== ExportResultCode.SUCCESS) this.counts.failed += spans.length;
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The batch processor behind a gate that knows its queue's length (spans handed in minus spans exported): a span
 * that would not fit is counted dropped here, where the processor itself would drop it with no count we can read.
 */
class BoundedProcessor implements SpanProcessor {
  constructor(readonly inner: BatchSpanProcessor, readonly counts: ExportCounts) {}

  onStart(span: SdkSpan, parent: Context): void {
    this.inner.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.counts.waiting >= EXPORT_LIMITS.queue) {
      this.counts.dropped += 1;
      return;
    }
    this.counts.waiting += 1;
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/**
 * One tracer provider's export path: the span processor to give it (the bounded queue before the OTLP exporter of
 * the configured protocol), and the report of what never reached the collector, logged at most once a minute.
 */
export class SpanExport {
  readonly processor: SpanProcessor;
  private readonly counts = new ExportCounts();
  private reported = { dropped: 0, failed: 0 };
  private readonly reporter: NodeJS.Timeout;

  constructor(private readonly config: TracingConfig, private readonly log: Logger) {
    const exporterOptions = {
      url: config.url,
      headers: { ...config.headers },
      timeoutMillis: EXPORT_LIMITS.timeoutMs,
      concurrencyLimit: EXPORT_LIMITS.inFlight,
    };
    const exporter = new CountingExporter(
      config.protocol === 'http/json' ? new JsonExporter(exporterOptions) : new ProtobufExporter(exporterOptions),
      this.counts,
    );
    this.processor = new BoundedProcessor(
      new BatchSpanProcessor({
        exporter,
        maxQueueSize: EXPORT_LIMITS.queue,
        maxExportBatchSize: EXPORT_LIMITS.batch,
        scheduledDelayMillis: EXPORT_LIMITS.delayMs,
        exportTimeoutMillis: EXPORT_LIMITS.timeoutMs,
      }),
      this.counts,
    );
    this.reporter = setInterval(() => this.report(), DROP_REPORT_MS);
    this.reporter.unref();
  }

  /** Ends the periodic report (at shutdown, before the last flush). */
  stopReporting(): void {
    clearInterval(this.reporter);
  }

  /**
   * The report as the process stops: when the last flush gave up, the spans still queued or sent and unanswered are
   * lost with the process, so they are counted failed; what was lost since the last report is said before it goes.
   */
  reportLast(flushGaveUp: boolean): void {
    if (flushGaveUp) this.counts.failed += this.counts.waiting + this.counts.sending;
    this.report();
  }

  private report(): void {
    const dropped = this.counts.dropped - this.reported.dropped;
    const failed = this.counts.failed - this.reported.failed;
    if (dropped === 0 && failed === 0) return;
    this.reported = { dropped: this.counts.dropped, failed: this.counts.failed };
    this.log.warn(
      { droppedSpans: dropped, failedSpans: failed, queueLimit: EXPORT_LIMITS.queue, url: redactedUrl(this.config.url) },
      'spans were not exported (queue full, or the collector refused or did not answer)',
    );
  }
}

/** The collector URL as logged: without credentials or query. */
function redactedUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
}
