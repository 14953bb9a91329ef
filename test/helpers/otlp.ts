import { Receiver, type Responder } from './receiver.js';

/** One span as an OTLP/HTTP JSON export carries it (trace and span ids are hex strings in OTLP JSON). */
export interface ExportedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  readonly resource: Readonly<Record<string, string | number | boolean>>;
}

interface AnyValue {
  readonly stringValue?: string;
  readonly intValue?: string | number;
  readonly boolValue?: boolean;
  readonly doubleValue?: number;
}

/** OTLP's attribute list, as http/json sends it. */
type KeyValues = ReadonlyArray<{ key: string; value: AnyValue }>;

function attributes(list: KeyValues | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    out[key] = value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.boolValue ?? value.doubleValue ?? '';
  }
  return out;
}

/**
 * A real OTLP/HTTP receiver (protocol http/json): a node:http server on 127.0.0.1 that decodes each export request
 * of /v1/traces into spans. `respond` says how it answers (200 by default; 'hang' to never answer).
 */
export class OtlpReceiver {
  private constructor(readonly receiver: Receiver) {}

  static async start(respond: Responder = () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{}' })): Promise<OtlpReceiver> {
    return new OtlpReceiver(await Receiver.start(respond));
  }

  /** OTEL_EXPORTER_OTLP_ENDPOINT for it. */
  get endpoint(): string {
    return `http://127.0.0.1:${this.receiver.port}`;
  }

  get spans(): ExportedSpan[] {
    const spans: ExportedSpan[] = [];
    for (const request of this.receiver.received) {
      if (request.headers['content-type'] !== 'application/json') continue;
      const body = JSON.parse(request.body) as {
        resourceSpans?: Array<{ resource?: { attributes?: KeyValues }; scopeSpans?: Array<{ spans?: Array<Omit<ExportedSpan, 'attributes' | 'resource'> & { attributes?: KeyValues }> }> }>;
      };
      for (const resourceSpans of body.resourceSpans ?? []) {
        const resource = attributes(resourceSpans.resource?.attributes);
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({ ...span, attributes: attributes(span.attributes), resource });
          }
        }
      }
    }
    return spans;
  }

  /** Resolves with the spans once `check` finds what it wants in them; fails after `timeoutMs`. */
  async waitForSpans(check: (spans: ExportedSpan[]) => boolean, timeoutMs = 20_000, what = 'spans'): Promise<ExportedSpan[]> {
    await this.receiver.waitFor(() => check(this.spans), timeoutMs, what);
    return this.spans;
  }

  close(): Promise<void> {
    return this.receiver.close();
  }
}
