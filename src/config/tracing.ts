/**
 * The standard OpenTelemetry variables this service honours, read once with the rest of the configuration
 * (./config.ts). Tracing is off unless an OTLP endpoint is given: an SDK that exported to the specification's
 * default (localhost:4318) whenever it was loaded would make connections nobody asked for.
 */
import { ConfigError, boolean, read, type Env } from './variables.js';

type OtlpProtocol = 'http/protobuf' | 'http/json';

type SamplerName =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

export interface TracingConfig {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  readonly url: string;
  readonly protocol: OtlpProtocol;
  /** Sent with every export (a collector's API key, typically): never logged. */
  readonly headers: Readonly<Record<string, string>>;
  readonly serviceName: string;
  readonly resourceAttributes: Readonly<Record<string, string>>;
  readonly sampler: SamplerName;
  /** The ratio of the traceidratio samplers, 0 to 1. */
  readonly samplerRatio: number;
}

/** `key=value,key2=value2`, values percent-encoded (the W3C Baggage form both variables use). */
function parseKeyValues(raw: string, variable: 'OTEL_EXPORTER_OTLP_HEADERS' | 'OTEL_RESOURCE_ATTRIBUTES'): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const item of raw.split(',')) {
    if (item.trim() === '') continue;
    const equals = item.indexOf('=');
    const key = equals > 0 ? item.slice(0, equals).trim() : '';
    if (key === '') throw new ConfigError(variable, 'must be comma-separated key=value pairs');
    let value: string;
    try {
      value = decodeURIComponent(item.slice(equals + 1).trim());
    } catch {
      throw new ConfigError(variable, `the value of ${JSON.stringify(key)} is not valid percent-encoding`);
    }
    pairs[key] = value;
  }
  return pairs;
}

function endpoint(raw: string, variable: 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(variable, `must be an http:// or https:// URL, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(variable, `must be an http:// or https:// URL (OTLP over HTTP; gRPC is not supported)`);
  return url;
}

/** The tracing configuration, or null when tracing is off (no endpoint, or OTEL_SDK_DISABLED=true). */
export function tracingConfig(env: Env): TracingConfig | null {
  if (boolean(env, 'OTEL_SDK_DISABLED', false)) return null;
  const traces = read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')?.trim();
  const base = read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')?.trim();
  let url: string;
  if (traces) url = endpoint(traces, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT').href;
  else if (base) {
    // The specification: the signal's path is appended to the base endpoint, whatever path it has.
    const parsed = endpoint(base, 'OTEL_EXPORTER_OTLP_ENDPOINT');
    parsed.pathname = `${parsed.pathname.replace(/\/+$/, '')}/v1/traces`;
    url = parsed.href;
  } else return null;
  const protocol = read(env, 'OTEL_EXPORTER_OTLP_PROTOCOL')?.trim() || 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    throw new ConfigError('OTEL_EXPORTER_OTLP_PROTOCOL', `must be http/protobuf or http/json (gRPC is not supported), got ${JSON.stringify(protocol)}`);
  }
  const sampler = (read(env, 'OTEL_TRACES_SAMPLER')?.trim() || 'parentbased_always_on') as SamplerName;
  if (!SAMPLERS.includes(sampler)) throw new ConfigError('OTEL_TRACES_SAMPLER', `must be one of ${SAMPLERS.join(', ')}, got ${JSON.stringify(sampler)}`);
  const rawRatio = read(env, 'OTEL_TRACES_SAMPLER_ARG')?.trim();
  let samplerRatio = 1;
  if (rawRatio) {
    samplerRatio = Number(rawRatio);
    if (!/^\d*\.?\d+$/.test(rawRatio) || samplerRatio < 0 || samplerRatio > 1) {
      throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `must be a ratio between 0 and 1, got ${JSON.stringify(rawRatio)}`);
    }
  }
  const resourceAttributes = parseKeyValues(read(env, 'OTEL_RESOURCE_ATTRIBUTES') ?? '', 'OTEL_RESOURCE_ATTRIBUTES');
  return {
    url,
    protocol,
    headers: parseKeyValues(read(env, 'OTEL_EXPORTER_OTLP_HEADERS') ?? '', 'OTEL_EXPORTER_OTLP_HEADERS'),
    // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES, as the specification says.
    serviceName: read(env, 'OTEL_SERVICE_NAME')?.trim() || resourceAttributes['service.name'] || 'plantstore',
    resourceAttributes,
    sampler,
    samplerRatio,
  };
}
