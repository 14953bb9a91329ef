/**
 * The environment variables the configuration is read from, and how each kind of value among them is read and checked
 * (a whole number in a range, a duration, on/off, true/false), failing with a ConfigError that names the variable.
 * What each variable means, and the configuration made of them, is src/config/config.ts's.
 */

export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

/** The environment, as loadConfig is given it. */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * Every environment variable loadConfig reads, in the order docs/configuration.md lists them. Reads go through `read`,
 * which takes no other name, so a new variable cannot be read without being listed; whoever must start the service in
 * its default configuration (the bench) unsets exactly these.
 */
export const CONFIG_VARIABLES = [
  'PORT',
  'HOST',
  'TLS_CERT_FILE',
  'TLS_KEY_FILE',
  'TLS_MIN_VERSION',
  'TLS_CIPHERS',
  'TRUST_PROXY',
  'DATABASE_URL',
  'PG_POOL_SIZE',
  'LOG_LEVEL',
  'BODY_LIMIT_BYTES',
  'NAME_MAX_LENGTH',
  'TAG_MAX_LENGTH',
  'WRITE_QUEUE_LIMIT',
  'WRITE_BATCH_LIMIT',
  'WRITE_SYNC_HOLD_MS',
  'BULK_MAX_LINES',
  'TOKEN_CACHE_MS',
  'RATE_LIMIT_MAX',
  'RATE_LIMIT_WINDOW_MS',
  'RATE_LIMIT_BURST',
  'REQUEST_TIMEOUT_MS',
  'HEADERS_TIMEOUT_MS',
  'KEEP_ALIVE_TIMEOUT_MS',
  'MAX_HEADER_BYTES',
  'MAX_CONNECTIONS',
  'MAX_QUEUED_CONNECTIONS',
  'MAX_PENDING_REQUESTS',
  'TLS_HANDSHAKE_TIMEOUT_MS',
  'AUTH_FAILURE_LIMIT',
  'SHUTDOWN_TIMEOUT_MS',
  'METRICS',
  'METRICS_CACHE_MS',
  'WEBHOOK_RETRY_SCHEDULE',
  'WEBHOOK_TIMEOUT_MS',
  'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
  'WEBHOOK_RETENTION',
  'WEBHOOK_MAX_IN_FLIGHT',
  'WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION',
  'WEBHOOK_SECRET_GRACE',
  'FEED_RETENTION',
  'FEED_RETENTION_COUNT',
  'FEED_HEARTBEAT_MS',
  'FEED_STREAM_BUFFER_BYTES',
  'FEED_STREAMS_PER_TOKEN',
  'FEED_STREAMS_PER_ADDRESS',
  'FEED_POLL_MS',
  'WORKERS',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_SDK_DISABLED',
] as const;

export type ConfigVariable = (typeof CONFIG_VARIABLES)[number];

/** The one way a variable is read: by a name in CONFIG_VARIABLES. */
export const read = (env: Env, name: ConfigVariable): string | undefined => env[name];

export function integer(env: Env, name: ConfigVariable, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got ${JSON.stringify(raw)}`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

export function onOff(env: Env, name: ConfigVariable, fallback: boolean): boolean {
  const raw = read(env, name)?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'on') return true;
  if (raw === 'off') return false;
  throw new ConfigError(name, `must be on or off, got ${JSON.stringify(raw)}`);
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(\d{1,9})(ms|s|m|h|d)$/;

/** `500ms`, `5s`, `5m`, `2h`, `7d` in milliseconds, or undefined when the text is not one. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  return Number(match[1]) * (DURATION_UNITS_MS[match[2] as string] as number);
}

/** The longest duration a setting (or a token's --expires-in) takes: 366 days. */
export const MAX_DURATION_MS = 366 * 86_400_000;

export function duration(env: Env, name: ConfigVariable, fallback: string, minMs: number): number {
  const raw = read(env, name)?.trim() || fallback;
  const value = parseDuration(raw);
  if (value === undefined) throw new ConfigError(name, `must be a duration such as 500ms, 5s, 5m, 2h or 7d, got ${JSON.stringify(raw)}`);
  if (value < minMs || value > MAX_DURATION_MS) throw new ConfigError(name, `must be between ${minMs} ms and 366 days, got ${JSON.stringify(raw)}`);
  return value;
}

export function boolean(env: Env, name: ConfigVariable, fallback: boolean): boolean {
  const raw = read(env, name)?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(name, `must be true or false, got ${JSON.stringify(raw)}`);
}
