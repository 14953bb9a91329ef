import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** What one connection may make the server hold. */
export interface ConnectionLimits {
  /**
   * Requests of one connection whose handlers run at once. A pipelined request beyond them waits, parsed but not
   * handled, until an earlier answer has been handed to the kernel: HTTP/1.1 answers go out in order anyway, so
   * running more only builds answers that sit in memory behind one the client has not read.
   */
  readonly handledAtOnce: number;
  /**
   * Requests one connection may have sent and not yet been answered (handled or waiting); one more closes the
   * connection, and Node parses no further request of that read (src/http/node-internals.ts). Each one waiting costs
   * its request and response objects, so this is what a connection that never reads can make the server hold; it
   * leaves room for a client that pipelines a few hundred requests at once and reads the answers.
   */
  readonly unanswered: number;
  /** Bytes of answers one connection may have waiting for the kernel before no further handler starts. */
  readonly bufferedBytes: number;
  /** A connection with answer bytes waiting that takes none of them for this long is closed. */
  readonly stalledMs: number;
}

export const CONNECTION_LIMITS: ConnectionLimits = Object.freeze({
  handledAtOnce: 4,
  unanswered: 512,
  bufferedBytes: 1024 * 1024,
  stalledMs: 10_000,
});

/** Why a connection was closed by its bounds. */
export type ConnectionOverrun =
  | 'too many unanswered requests'
  | 'answers not read'
  | 'the server holds too many unanswered requests'
  | 'too many connections pipelining';

/**
 * Connections of the instance that may pipeline past `handledAtOnce` at once (each thread an equal share). A
 * connection that sends many requests in one write has them all parsed in one go, up to `unanswered`, before
 * anything can stop it, and that burst, not the connection, is what a flood costs: some 0.5 MiB of heap for 409
 * pipelined requests (docs/memory.md). Clients that wait for each answer (browsers, fetch, most HTTP libraries) never
 * pipeline, so they are never counted; pipelining clients get this many connections, which bounds a flood's cost
 * whatever MAX_CONNECTIONS is.
 */
export const PIPELINING_CONNECTIONS = 128;

/**
 * Handlers running at once, as a fraction of MAX_PENDING_REQUESTS: past them, a request waits, parsed, for its
 * address's turn (src/http/connection-admission.ts), so that under contention every address gets handlers started
 * in turn, however many connections it holds. Enough for full group commits of a busy client on its own.
 */
export const IN_FLIGHT_SHARE_OF_PENDING = 1 / 4;

/** Where the connection bookkeeping (src/http/connection-admission.ts) keeps a served socket's record. */
export const CONNECTION = Symbol('connection');

/** What stopCountingAsPending needs of a connection's record. */
export interface CountedConnection {
  stopCounting(response: ServerResponse): void;
}

/**
 * The request of `response` stops counting towards the server's pending requests (MAX_PENDING_REQUESTS) and its
 * handlers in flight: its answer is a stream that lasts as long as its connection (GET /plants/events), bounded by
 * the stream limits and the connection budget instead. Counted, 1,000 open streams would fill the bound, and every
 * connection that pipelines would be closed. It still counts on its own connection (`unanswered`, `handledAtOnce`).
 */
export function stopCountingAsPending(response: ServerResponse): void {
  (response.socket as (Socket & { [CONNECTION]?: CountedConnection }) | null)?.[CONNECTION]?.stopCounting(response);
}
