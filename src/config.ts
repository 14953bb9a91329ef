import path from 'node:path';

export type DatabaseConfig =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'postgres'; readonly url: string; readonly poolSize: number };

export interface RateLimitConfig {
  /** Sustained rate: a token earns this many requests per window. */
  readonly max: number;
  readonly windowMs: number;
  /** Most requests a token may send at once: the size of its bucket. */
  readonly burst: number;
}

export interface Config {
  readonly host: string;
  readonly port: number;
  readonly logLevel: string;
  readonly database: DatabaseConfig;
  readonly limits: {
    readonly bodyBytes: number;
    readonly nameLength: number;
    readonly tagLength: number;
  };
  readonly writes: {
    /** Creates waiting for storage before new ones are refused with 503. */
    readonly queueLimit: number;
    /** Rows committed in one transaction at most. */
    readonly batchLimit: number;
  };
  /** How long a cached token stays trusted before the store is asked again; bounds revocation delay. */
  readonly tokenCacheMs: number;
  readonly rateLimit: RateLimitConfig | null;
  readonly http: {
    readonly requestTimeoutMs: number;
    readonly headersTimeoutMs: number;
    readonly keepAliveTimeoutMs: number;
    readonly maxHeaderBytes: number;
  };
  readonly shutdownTimeoutMs: number;
}

export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Every environment variable loadConfig reads, in the order the README lists them. Reads go through `read`, which
 * takes no other name, so a new variable cannot be read without being listed; whoever must start the service in its
 * default configuration (the bench) unsets exactly these.
 */
export const CONFIG_VARIABLES = [
  'PORT',
  'HOST',
  'DATABASE_URL',
  'PG_POOL_SIZE',
  'LOG_LEVEL',
  'BODY_LIMIT_BYTES',
  'NAME_MAX_LENGTH',
  'TAG_MAX_LENGTH',
  'WRITE_QUEUE_LIMIT',
  'WRITE_BATCH_LIMIT',
  'TOKEN_CACHE_MS',
  'RATE_LIMIT_MAX',
  'RATE_LIMIT_WINDOW_MS',
  'RATE_LIMIT_BURST',
  'REQUEST_TIMEOUT_MS',
  'HEADERS_TIMEOUT_MS',
  'KEEP_ALIVE_TIMEOUT_MS',
  'MAX_HEADER_BYTES',
  'SHUTDOWN_TIMEOUT_MS',
] as const;

export type ConfigVariable = (typeof CONFIG_VARIABLES)[number];

const read = (env: Env, name: ConfigVariable): string | undefined => env[name];

const MAX_TAG_LENGTH = 600;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function integer(env: Env, name: ConfigVariable, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got ${JSON.stringify(raw)}`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function database(env: Env, cwd: string): DatabaseConfig {
  const raw = read(env, 'DATABASE_URL')?.trim() || 'sqlite:./data/plantstore.db';
  if (raw.startsWith('postgres://') || raw.startsWith('postgresql://')) {
    try {
      new URL(raw);
    } catch {
      throw new ConfigError('DATABASE_URL', 'is not a valid postgres:// URL');
    }
    return { kind: 'postgres', url: raw, poolSize: integer(env, 'PG_POOL_SIZE', 10, 1, 1000) };
  }
  if (raw.startsWith('sqlite:')) {
    // sqlite:./relative, sqlite:/absolute and sqlite:///absolute all name a file.
    const file = raw.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '' || file === ':memory:') {
      throw new ConfigError('DATABASE_URL', 'must name a SQLite file (an in-memory database is not durable)');
    }
    return { kind: 'sqlite', path: path.resolve(cwd, file) };
  }
  throw new ConfigError('DATABASE_URL', `must start with sqlite:, postgres:// or postgresql://, got ${JSON.stringify(raw.split(':')[0])}`);
}

/** Reads and validates the whole configuration once; the result is frozen and passed to whoever needs it. */
export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const logLevel = read(env, 'LOG_LEVEL')?.trim() || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  const rateMax = integer(env, 'RATE_LIMIT_MAX', 0, 0, 1_000_000_000);
  const config: Config = {
    host: read(env, 'HOST')?.trim() || '127.0.0.1',
    port: integer(env, 'PORT', 8080, 0, 65535),
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
    },
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 3_600_000),
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
