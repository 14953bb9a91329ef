import pg from 'pg';
import type { DatabaseConfig } from '../../config/config.js';
import { unavailableIf, type StorageErrorKind } from '../errors.js';

/**
 * How this service talks to PostgreSQL through pg: every connection's settings (durable commits, int8 as bigint,
 * bounded waits), the pool's, and which errors mean "the database cannot serve now". The store and its sub-stores
 * (plants.ts, tokens.ts, webhook-subscriptions.ts, webhook-outbox.ts) run their statements through the Query and
 * Transaction the store gives them.
 */

export type PostgresConfig = Extract<DatabaseConfig, { kind: 'postgres' }>;

/** int8 as bigint, on this pool's connections only (never the process-wide pg.types). */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 ? (value: string) => BigInt(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * SQLSTATEs meaning "the database cannot serve now, retry", by kind: connection exceptions (08), insufficient
 * resources (53; 53100 is a full disk), operator intervention (57P01-57P04 shutdown/restart, 57014 statement
 * timeout), system errors (58), serialization failure and deadlock (40001, 40P01), lock not available (55P03),
 * read-only transaction (25006). Also invalid authorization (class 28, e.g. 28P01 once the role's password is
 * rotated under running replicas) and a database that does not exist (3D000, dropped or being restored): no request
 * and no code path of this service causes them, a retry succeeds once the operator has put credentials or database
 * right, and meanwhile the replica should be taken out of rotation (unavailable storage also fails readiness), not
 * counted as a bug. The cause is still logged with every 5xx, and the CLI prints it.
 */
const UNAVAILABLE_SQLSTATE: ReadonlyArray<readonly [RegExp, StorageErrorKind]> = [
  [/^(08|28|3D000$|57P0)/, 'connection'],
  [/^57014$/, 'timeout'],
  [/^53100$/, 'disk_full'],
  [/^53/, 'resources'],
  [/^58/, 'io'],
  [/^(40001|40P01|55P03)$/, 'locked'],
  [/^25006$/, 'read_only'],
];
/** Socket errors on the way to the server; ENOENT is a Unix socket path with no server behind it. */
const UNAVAILABLE_NODE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOENT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
/** What pg and pg-pool throw, without a code, when a connection is lost, cannot be made in time or a query times out. */
const UNAVAILABLE_MESSAGE: ReadonlyArray<readonly [RegExp, StorageErrorKind]> = [
  [/^(timeout exceeded when trying to connect|Query read timeout)/, 'timeout'],
  [/^(Connection terminated|Client has encountered a connection error|Connection closed)/, 'connection'],
];

/** The kind of a pg or socket error meaning "not now"; undefined for anything else. */
export function unavailableKind(error: unknown): StorageErrorKind | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') {
    if (UNAVAILABLE_NODE.has(code)) return code === 'ETIMEDOUT' ? 'timeout' : 'connection';
    const kind = UNAVAILABLE_SQLSTATE.find(([pattern]) => pattern.test(code))?.[1];
    if (kind) return kind;
  }
  const message = (error as { message?: unknown } | undefined)?.message;
  if (typeof message !== 'string') return undefined;
  return UNAVAILABLE_MESSAGE.find(([pattern]) => pattern.test(message))?.[1];
}

/** A pg or socket error meaning "not now" as StorageUnavailableError with the original as its cause; anything else as it is. */
export function translate(error: unknown): unknown {
  return unavailableIf(error, (cause) => unavailableKind(cause) !== undefined);
}

/** Bounds every wait on the database, so an unreachable or stuck server is a prompt StorageUnavailableError, never a hang. */
export const POSTGRES_TIMEOUTS = {
  /** Getting a connection: opening a new one, or waiting for a free one when the pool is busy. */
  connectMs: 2000,
  /** One statement, server side (statement_timeout) and client side (query_timeout, for a silent network). */
  queryMs: 10_000,
} as const;

export type PostgresTimeouts = { readonly [K in keyof typeof POSTGRES_TIMEOUTS]: number };

/** Last, so it wins: PostgreSQL applies the -c switches of a connection's options in order. */
const SYNCHRONOUS_COMMIT_ON = '-c synchronous_commit=on';

/**
 * The URL without its `options` parameter, and the options to send instead: the URL's own, then synchronous_commit=on.
 * pg lets an `options` in the URL replace the pool's `options` outright, so the URL's must be taken out and joined.
 */
function durableConnection(url: string): { connectionString: string; options: string } {
  const parsed = new URL(url);
  // pg keeps the last of repeated parameters.
  const given = parsed.searchParams.getAll('options').at(-1);
  if (given === undefined) return { connectionString: url, options: SYNCHRONOUS_COMMIT_ON };
  parsed.searchParams.delete('options');
  return { connectionString: parsed.toString(), options: given.trim() === '' ? SYNCHRONOUS_COMMIT_ON : `${given} ${SYNCHRONOUS_COMMIT_ON}` };
}

/**
 * Every connection's settings, pooled or not. Every connection asks for synchronous_commit=on itself: a 200 must mean
 * the commit's WAL is flushed, whatever default the server, database or role was given (managed services sometimes
 * turn it off), and whatever the URL's `options` say.
 */
export function connectionConfig(config: PostgresConfig, timeouts: PostgresTimeouts): pg.ClientConfig {
  return {
    // sslmode, PGHOST, PGUSER, PGPASSWORD and the rest are read by pg itself from the URL and the environment.
    ...durableConnection(config.url),
    types,
    connectionTimeoutMillis: timeouts.connectMs,
    // Notices a peer that vanished without closing the connection (a failed-over managed database).
    keepAlive: true,
  };
}

/** The pool's settings: every statement a request makes is bounded by the query timeout. */
export function poolConfig(config: PostgresConfig, timeouts: PostgresTimeouts = POSTGRES_TIMEOUTS): pg.PoolConfig {
  return {
    ...connectionConfig(config, timeouts),
    max: config.poolSize,
    query_timeout: timeouts.queryMs,
    statement_timeout: timeouts.queryMs,
    idleTimeoutMillis: 30_000,
  };
}

/** One statement on a pooled connection, its errors translated: SQL text, or a named (prepared) statement's config. */
export type Query = <R extends pg.QueryResultRow>(text: string | pg.QueryConfig, values?: unknown[]) => Promise<pg.QueryResult<R>>;
/** `work` in one transaction on one pooled connection, rolled back if it throws. */
export type Transaction = <T>(work: (query: Query) => Promise<T>) => Promise<T>;

/** A statement's text or config with its values, as pg takes it. */
export function statement(text: string | pg.QueryConfig, values: unknown[]): pg.QueryConfig {
  return typeof text === 'string' ? { text, values } : { ...text, values };
}
