import type { IncomingMessage, ServerResponse } from 'node:http';
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
 * anything can stop it, and that burst, not the connection, is what a flood costs: the heap its parsed requests
 * hold (docs/memory.md). Clients that wait for each answer (browsers, fetch, most HTTP libraries) never
 * pipeline, so they are never counted; pipelining clients get this many connections, which bounds a flood's cost
 * whatever MAX_CONNECTIONS is.
 */
export const PIPELINING_CONNECTIONS = 128;

/**
 * Handlers running at once, as a fraction of MAX_PENDING_REQUESTS: past them, a request waits, parsed, for its
 * address's turn (src/http/request-bounds.ts), so that under contention every address gets handlers started
 * in turn, however many connections it holds. Enough for full group commits of a busy client on its own.
 */
export const IN_FLIGHT_SHARE_OF_PENDING = 1 / 4;

/** Where the connection bookkeeping (src/http/connection-admission.ts) keeps a served socket's record. */
export const CONNECTION = Symbol('connection');

/** The record of a socket (under CONNECTION), for the functions that have only a request or a response. */
export function connectionOf(socket: Socket | null | undefined): ConnectionRequests | undefined {
  return (socket as (Socket & { [CONNECTION]?: ConnectionRequests }) | null | undefined)?.[CONNECTION];
}

/**
 * The request of `response` stops counting towards the server's pending requests (MAX_PENDING_REQUESTS) and its
 * handlers in flight: its answer is a stream that lasts as long as its connection (GET /plants/events), bounded by
 * the stream limits and the connection budget instead. Counted, 1,000 open streams would fill the bound, and every
 * connection that pipelines would be closed. It still counts on its own connection (`unanswered`, `handledAtOnce`).
 */
export function stopCountingAsPending(response: ServerResponse): void {
  const connection = connectionOf(response.socket);
  connection?.bounds.stopCounting(connection, response);
}

/** Requests parsed and not answered over all connections, and handlers running at once. */
export interface InstanceRequestLimits {
  /** Requests parsed and not answered over all connections (MAX_PENDING_REQUESTS). */
  readonly pending: number;
  /** Handlers running at once; past them requests start in turn by address. */
  readonly inFlight: number;
  /** Connections pipelining past `handledAtOnce` at once. */
  readonly pipelining: number;
}

/** What a connection's record needs of the RequestBounds (src/http/request-bounds.ts) it belongs to (methods: a subclass's bounds fit). */
interface OwnBounds {
  stopCounting(connection: ConnectionRequests, response: ServerResponse): void;
  answered(connection: ConnectionRequests, request: IncomingMessage, response: ServerResponse): void;
}

/** What the requests of one connection hold; the connection bookkeeping's record of it extends this. */
export class ConnectionRequests {
  /** The socket its requests come on: the TCP socket, or the TLS socket over it. */
  wire: Socket;
  /** Handlers started whose answers are not done. */
  readonly handled = new Map<IncomingMessage, ServerResponse>();
  /** Of `handled`, those that stopped counting (stopCountingAsPending). */
  uncounted: Set<ServerResponse> | undefined;
  /** Parsed requests waiting for a handler, oldest first from `head` on. */
  queue: Array<readonly [IncomingMessage, ServerResponse]> = [];
  head = 0;
  /** When an answer last left for the kernel. */
  progressAt = performance.now();
  releaseScheduled = false;
  /** Waiting for its address's turn at a handler slot. */
  ready = false;
  pipelining = false;
  /** Its requests no longer count: it is closing. */
  gone = false;

  constructor(
    /** The bounds of the server it came to. */
    readonly bounds: OwnBounds,
    readonly address: string,
    socket: Socket,
  ) {
    this.wire = socket;
  }

  get unanswered(): number {
    return this.handled.size + this.queue.length - this.head;
  }
}
