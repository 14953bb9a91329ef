/**
 * The service's configuration: what it holds (Config), and loadConfig, which reads it from the environment once,
 * through the variables and value readers of ./variables.ts, checks it and freezes it. Its database, TLS, webhook
 * and tracing (OTEL_*) sections, and the number of threads, are read by ./database.ts, ./tls.ts, ./webhooks.ts,
 * ./tracing.ts and ./workers.ts, each called from loadConfig only.
 */
import { isIP } from 'node:net';
import { database, type DatabaseConfig } from './database.js';
import { tlsConfig, type TlsConfig } from './tls.js';
import { ConfigError, duration, integer, onOff, read, type Env } from './variables.js';
import { tracingConfig, type TracingConfig } from './tracing.js';
import { webhooks, type WebhookConfig } from './webhooks.js';
import { currentHost, workers, type HostFacts } from './workers.js';

// The sections in modules of their own are part of Config, so what their readers need is named here too.
export { DEFAULT_DATABASE_URL, type DatabaseConfig } from './database.js';
export { DEFAULT_TLS_CIPHERS, type TlsConfig, type TlsPolicy } from './tls.js';
export type { WebhookConfig } from './webhooks.js';
export { AUTO_WORKER_MEMORY_BYTES, type HostFacts } from './workers.js';

export interface RateLimitConfig {
  /** Sustained rate: a token earns this many requests per window. */
  readonly max: number;
  readonly windowMs: number;
  /** Most requests a token may send at once: the size of its bucket. */
  readonly burst: number;
}

interface FeedConfig {
  /** Changes older than this are pruned (FEED_RETENTION). */
  readonly retentionMs: number;
  /** At most this many changes are kept (FEED_RETENTION_COUNT). */
  readonly retentionCount: number;
  /** A comment line this often on every live stream (FEED_HEARTBEAT_MS). */
  readonly heartbeatMs: number;
  /** A stream whose unsent bytes pass this is closed (FEED_STREAM_BUFFER_BYTES). */
  readonly streamBufferBytes: number;
  /** Streams one token, and one client address, may hold open at once, per thread (FEED_STREAMS_PER_TOKEN, _PER_ADDRESS). */
  readonly streamsPerToken: number;
  readonly streamsPerAddress: number;
  /** The fallback poll of the change log, for a wake-up lost on the way (FEED_POLL_MS). */
  readonly pollMs: number;
}

export interface Config {
  readonly host: string;
  readonly port: number;
  /** HTTPS only on PORT when set; plain HTTP otherwise. */
  readonly tls: TlsConfig | null;
  /**
   * Proxies whose X-Forwarded-For, -Proto and -Host are believed (Fastify's trustProxy): addresses, CIDRs or
   * `loopback`; empty, the default, believes none.
   */
  readonly trustProxy: readonly string[];
  readonly logLevel: string;
  readonly database: DatabaseConfig;
  readonly limits: {
    readonly bodyBytes: number;
    readonly nameLength: number;
    readonly tagLength: number;
  };
  /** Streamed bulk creates (POST /plants as NDJSON). */
  readonly bulk: {
    /** Lines one request may have; the next is answered by a final 413 line. */
    readonly maxLines: number;
    /** Lines of one request read and not yet answered at most (not configurable: bounds a request's memory). */
    readonly window: number;
  };
  readonly writes: {
    /** Creates waiting for storage before new ones are refused with 503. */
    readonly queueLimit: number;
    /** Rows committed in one transaction at most. */
    readonly batchLimit: number;
    /**
     * SQLite: after a WAL sync returns, how long the next commit waits with none of the clients just answered sending
     * again (WriteQueueOptions.postSyncHoldMs); 0 commits at once.
     */
    readonly syncHoldMs: number;
  };
  /** How long a cached token stays trusted before the store is asked again; bounds revocation delay. */
  readonly tokenCacheMs: number;
  readonly rateLimit: RateLimitConfig | null;
  readonly http: {
    readonly requestTimeoutMs: number;
    readonly headersTimeoutMs: number;
    readonly keepAliveTimeoutMs: number;
    readonly maxHeaderBytes: number;
    /**
     * Connections the instance serves at once (TLS handshakes included), whatever address they come from; more wait,
     * unread, and only then are the slots shared among addresses (src/http/connection-admission.ts).
     */
    readonly maxConnections: number;
    /** Connections accepted and waiting for a slot at most; one more is answered 503 with Retry-After. */
    readonly maxQueuedConnections: number;
    /**
     * Requests parsed and not yet answered, over every connection of the instance; one more closes the connection it
     * came on, unless it is that connection's only one.
     */
    readonly maxPendingRequests: number;
    /** A TLS handshake not done within this is cut off (with TLS only). */
    readonly tlsHandshakeTimeoutMs: number;
  };
  /**
   * Failed authentications a client address may make per minute (its burst too) before further failing ones are
   * answered 429; null when AUTH_FAILURE_LIMIT=0.
   */
  readonly authFailureLimit: number | null;
  readonly shutdownTimeoutMs: number;
  /** Whether GET /metrics exists and the service keeps Prometheus metrics (METRICS=on|off). */
  readonly metrics: boolean;
  /** GET /metrics renders at most once per this many milliseconds, answering the same text meanwhile. */
  readonly metricsCacheMs: number;
  readonly webhooks: WebhookConfig;
  /** The change feed, GET /plants/events (src/feed/, src/http/event-stream.ts). */
  readonly feed: FeedConfig;
  /** Threads serving HTTP on the one PORT (WORKERS): 1 serves on the main thread alone; more add worker threads (src/workers/). */
  readonly workers: number;
  /** OpenTelemetry traces (the standard OTEL_* variables); null, the default, when no OTLP endpoint is set. */
  readonly tracing: TracingConfig | null;
}

const MAX_TAG_LENGTH = 600;

/**
 * Lines of one streamed bulk create read and not yet answered at most: about two group commits of the default
 * WRITE_BATCH_LIMIT, so one commits while the next fills, and a few streams together stay well under WRITE_QUEUE_LIMIT.
 */
const BULK_WINDOW = 1024;

/**
 * MAX_CONNECTIONS' default, from docs/memory.md's budget ("The whole instance"): as many idle keep-alive connections,
 * TLS ones included, as fit a 512 MiB container beside the server's own memory and a pipelining flood's growth;
 * twice as many idle TLS connections would not fit. Past it, connections wait (MAX_QUEUED_CONNECTIONS) instead of
 * being closed.
 */
const DEFAULT_MAX_CONNECTIONS = 2048;

/**
 * MAX_QUEUED_CONNECTIONS' default: a waiting connection is not read, so it costs a socket object and not its
 * request, and this many fit the budget of docs/memory.md ("The whole instance").
 */
const DEFAULT_MAX_QUEUED_CONNECTIONS = 4096;

/**
 * MAX_PENDING_REQUESTS' default: requests parsed and not answered, over the whole instance. Each costs its request
 * and response objects (a few KiB), but a larger bound also keeps the server busy longer with a flood's requests
 * before a probe's turn comes: at 8,192, /healthz timed out under the 400-connection flood; at this many it answered
 * in milliseconds. Two connections pipelining 512 requests each, or 128 pipelining 8, fit.
 */
const DEFAULT_MAX_PENDING_REQUESTS = 1024;

/**
 * FEED_STREAMS_PER_TOKEN's and FEED_STREAMS_PER_ADDRESS' default: what the memory budget allows one client to hold
 * (docs/memory.md): a stream costs its connection (some 23 KiB) and at most FEED_STREAM_BUFFER_BYTES of unsent events,
 * so this many live viewers cost tens of MiB, a quarter of MAX_CONNECTIONS' default, and a dashboard whose viewers share
 * one read-only token is served.
 */
const DEFAULT_FEED_STREAMS = 512;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * TRUST_PROXY's entries as Fastify's trustProxy (@fastify/proxy-addr) takes them: `loopback`, an address, or an
 * address/prefix. Checked here so a typo fails at start naming the variable, and only in the forms proxy-addr
 * reads the same way: a dotted-quad IPv4 or an IPv6 address, a prefix of 1 to 32 or 128 (it refuses /0).
 */
function trustProxy(env: Env): string[] {
  const raw = read(env, 'TRUST_PROXY')?.trim() ?? '';
  if (raw === '') return [];
  return raw.split(',').map((entry) => {
    const text = entry.trim();
    if (text === 'loopback') return text;
    const [address = '', prefix, ...rest] = text.split('/');
    const family = address.includes('%') ? 0 : isIP(address);
    const bits = family === 6 ? 128 : 32;
    if (family === 0 || rest.length > 0 || (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= bits))) {
      throw new ConfigError(
        'TRUST_PROXY',
        `must be a comma-separated list of proxy addresses (10.0.0.7, ::1), CIDR ranges (10.0.0.0/8, fd00::/8, prefix 1 to 32 or 128) or loopback; ${JSON.stringify(text)} is not one`,
      );
    }
    return text;
  });
}

/** Reads and validates the whole configuration once; the result is frozen and passed to whoever needs it. */
export function loadConfig(env: Env = process.env, cwd: string = process.cwd(), host: HostFacts = currentHost()): Config {
  const logLevel = read(env, 'LOG_LEVEL')?.trim() || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  const rateMax = integer(env, 'RATE_LIMIT_MAX', 0, 0, 1_000_000_000);
  const config: Config = {
    host: read(env, 'HOST')?.trim() || '127.0.0.1',
    port: integer(env, 'PORT', 8080, 0, 65535),
    tls: tlsConfig(env, cwd),
    trustProxy: trustProxy(env),
    logLevel,
    database: database(env, cwd),
    limits: {
      bodyBytes: integer(env, 'BODY_LIMIT_BYTES', 16 * 1024, 64, 64 * 1024 * 1024),
      nameLength: integer(env, 'NAME_MAX_LENGTH', 256, 1, 1_000_000),
      // Tags are indexed with the id: 600 characters (at most 2400 bytes of UTF-8) keep an index entry within what a
      // PostgreSQL B-tree page holds (about 2700 bytes); a longer one would fail its whole create batch there.
      tagLength: integer(env, 'TAG_MAX_LENGTH', 64, 1, MAX_TAG_LENGTH),
    },
    writes: {
      queueLimit: integer(env, 'WRITE_QUEUE_LIMIT', 10_000, 1, 10_000_000),
      batchLimit: integer(env, 'WRITE_BATCH_LIMIT', 500, 1, 100_000),
      syncHoldMs: integer(env, 'WRITE_SYNC_HOLD_MS', 3, 0, 10),
    },
    bulk: {
      maxLines: integer(env, 'BULK_MAX_LINES', 1_000_000, 1, 1_000_000_000),
      window: BULK_WINDOW,
    },
    tokenCacheMs: integer(env, 'TOKEN_CACHE_MS', 1000, 0, 60_000),
    rateLimit:
      rateMax > 0
        ? {
            max: rateMax,
            windowMs: integer(env, 'RATE_LIMIT_WINDOW_MS', 1000, 1, 3_600_000),
            burst: integer(env, 'RATE_LIMIT_BURST', rateMax, 1, 1_000_000_000),
          }
        : null,
    http: {
      requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 10_000, 1, 3_600_000),
      headersTimeoutMs: integer(env, 'HEADERS_TIMEOUT_MS', 5_000, 1, 3_600_000),
      keepAliveTimeoutMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 5_000, 1, 3_600_000),
      maxHeaderBytes: integer(env, 'MAX_HEADER_BYTES', 8 * 1024, 1024, 1024 * 1024),
      maxConnections: integer(env, 'MAX_CONNECTIONS', DEFAULT_MAX_CONNECTIONS, 1, 1_000_000),
      maxQueuedConnections: integer(env, 'MAX_QUEUED_CONNECTIONS', DEFAULT_MAX_QUEUED_CONNECTIONS, 0, 1_000_000),
      maxPendingRequests: integer(env, 'MAX_PENDING_REQUESTS', DEFAULT_MAX_PENDING_REQUESTS, 1, 10_000_000),
      tlsHandshakeTimeoutMs: integer(env, 'TLS_HANDSHAKE_TIMEOUT_MS', 3_000, 1, 3_600_000),
    },
    authFailureLimit: integer(env, 'AUTH_FAILURE_LIMIT', 60, 0, 1_000_000) || null,
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 3_600_000),
    metrics: onOff(env, 'METRICS', true),
    metricsCacheMs: integer(env, 'METRICS_CACHE_MS', 1000, 0, 60_000),
    webhooks: webhooks(env),
    feed: {
      retentionMs: duration(env, 'FEED_RETENTION', '7d', 60_000),
      retentionCount: integer(env, 'FEED_RETENTION_COUNT', 1_000_000, 1, 1_000_000_000),
      heartbeatMs: integer(env, 'FEED_HEARTBEAT_MS', 15_000, 10, 3_600_000),
      streamBufferBytes: integer(env, 'FEED_STREAM_BUFFER_BYTES', 256 * 1024, 1024, 1024 * 1024 * 1024),
      streamsPerToken: integer(env, 'FEED_STREAMS_PER_TOKEN', DEFAULT_FEED_STREAMS, 1, 1_000_000),
      streamsPerAddress: integer(env, 'FEED_STREAMS_PER_ADDRESS', DEFAULT_FEED_STREAMS, 1, 1_000_000),
      pollMs: integer(env, 'FEED_POLL_MS', 5_000, 10, 3_600_000),
    },
    workers: workers(env, host),
    tracing: tracingConfig(env),
  };
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
