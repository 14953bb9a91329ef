import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { destroyWithoutStackTraces } from './node-internals.js';

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
 * address's turn (src/http/connection-admission.ts), so that under contention every address gets handlers started
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

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** Requests parsed and not answered over all connections, and handlers running at once. */
export interface InstanceRequestLimits {
  /** Requests parsed and not answered over all connections (MAX_PENDING_REQUESTS). */
  readonly pending: number;
  /** Handlers running at once; past them requests start in turn by address. */
  readonly inFlight: number;
  /** Connections pipelining past `handledAtOnce` at once. */
  readonly pipelining: number;
}

/** What RequestBounds tells the connection bookkeeping. */
export interface RequestEvents<C extends ConnectionRequests> {
  /** A request was parsed and is counted; `first` when the connection had none unanswered. */
  parsed(connection: C, response: ServerResponse, first: boolean): void;
  /** The connection has nothing unanswered any more. */
  idle(connection: C): void;
  /** The connection is closed for overrunning its bounds. */
  overran(connection: C, why: ConnectionOverrun): void;
}

/** What a connection's record needs of the RequestBounds it belongs to (methods: a subclass's bounds fit). */
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

/** The one 'close' listener of every started response: no closure per request. */
function answered(this: ServerResponse): void {
  const request = this.req;
  const connection = connectionOf(request.socket);
  connection?.bounds.answered(connection, request, this);
}

/**
 * What the requests of every connection may make the server hold, and in what turn their handlers start. At most
 * `handledAtOnce` handlers of a connection run at once, and none starts while its socket has more than
 * `bufferedBytes` unwritten; more than `unanswered` requests ahead close it, and so does a connection whose answers
 * wait unread for `stalledMs`. Over all connections, more than `pending` requests parsed close the connection that
 * pipelines past them, and at most `inFlight` handlers run: past that, requests start in turn by client address, one
 * each, so a client on a thousand connections gets the same turns as one on ten. A connection's first request starts
 * at once from Node's request event; a pipelined one, or one that waits its turn, from the check phase
 * (`#scheduleRelease`), so that a connection that overruns within one socket read runs no further handler.
 */
export class RequestBounds<C extends ConnectionRequests> {
  readonly #perConnection: ConnectionLimits;
  readonly #limits: InstanceRequestLimits;
  readonly #handler: Handler;
  readonly #events: RequestEvents<C>;
  /** Connections waiting for a handler slot, by address; the map's order is the order addresses get turns in. */
  readonly #turns = new Map<string, C[]>();
  #pending = 0;
  #inFlight = 0;
  #pipelining = 0;
  /** Pipelining is refused while the requests held stay above half of `pending` after one overran it. */
  #pipeliningShut = false;
  #turnsScheduled = false;

  constructor(perConnection: ConnectionLimits, limits: InstanceRequestLimits, handler: Handler, events: RequestEvents<C>) {
    this.#perConnection = perConnection;
    this.#limits = limits;
    this.#handler = handler;
    this.#events = events;
  }

  /** Requests parsed and not yet answered, over every open connection. */
  get pending(): number {
    return this.#pending;
  }

  /** A request parsed on `connection`. */
  handle(connection: C, request: IncomingMessage, response: ServerResponse): void {
    // Parsed on a connection already closed (Node finishes parsing the read it is in): nobody waits for its answer.
    if (connection.gone) return;
    const unanswered = connection.unanswered;
    if (unanswered > 0 && !this.#admitsAnother(connection, unanswered)) return;
    this.#pending += 1;
    this.#events.parsed(connection, response, unanswered === 0);
    if (unanswered === 0 && this.#inFlight < this.#limits.inFlight && this.#turns.size === 0) {
      this.#start(connection, request, response);
      return;
    }
    connection.queue.push([request, response]);
    this.#scheduleRelease(connection);
  }

  /** Whether `connection` may have one more request beyond the `unanswered` it has; if not, it is closed. */
  #admitsAnother(connection: C, unanswered: number): boolean {
    const limits = this.#perConnection;
    if (unanswered >= limits.unanswered) return this.overrun(connection, 'too many unanswered requests');
    if (unanswered >= limits.handledAtOnce && this.#pipeliningShut) return this.overrun(connection, 'the server holds too many unanswered requests');
    if (unanswered >= limits.handledAtOnce && !connection.pipelining) {
      if (this.#pipelining >= this.#limits.pipelining) return this.overrun(connection, 'too many connections pipelining');
      connection.pipelining = true;
      this.#pipelining += 1;
    }
    if (this.#pending >= this.#limits.pending) {
      // The connection that brought the request is closed, not the one holding the most: Node parses every socket
      // read of a turn of the event loop, each whole, before anything else runs, so only closing the connection being
      // parsed stops more requests being made. A connection's only request is let through: it is not what fills the
      // server, and closing it would reset a client that did nothing wrong.
      this.overrun(connection, 'the server holds too many unanswered requests');
      if (unanswered >= limits.handledAtOnce && this.#pending > this.#limits.pending / 2) this.#pipeliningShut = true;
      return false;
    }
    return true;
  }

  /** Its request stops counting towards the pending requests and the handlers in flight (see stopCountingAsPending). */
  stopCounting(connection: C, response: ServerResponse): void {
    if (!connection.handled.has(response.req) || connection.uncounted?.has(response)) return;
    (connection.uncounted ??= new Set()).add(response);
    if (!connection.gone) this.#answersFell(1, 1);
  }

  /** Its requests stop counting: it is closing. */
  forget(connection: C): void {
    this.#stopPipelining(connection);
    if (connection.gone) return;
    connection.gone = true;
    const counted = connection.handled.size - (connection.uncounted?.size ?? 0);
    this.#answersFell(counted + connection.queue.length - connection.head, counted);
  }

  /** The connection closed: its handlers' requests and responses end here, whatever Node did with them. */
  closed(connection: C): void {
    this.forget(connection);
    connection.queue = [];
    // Node aborts the requests and responses of a connection that closes, unless it stopped parsing as for an
    // upgrade (node-internals.ts), and then it leaves them be: the handlers that run end here all the same.
    for (const [request, response] of connection.handled) {
      request.destroy();
      response.destroy();
    }
  }

  /** Answers left for the kernel (the socket drained): a waiting request may start. */
  progressed(connection: C): void {
    connection.progressAt = performance.now();
    if (connection.head < connection.queue.length) this.#scheduleRelease(connection);
  }

  /** Closes the connection if its answers have waited unread, in the kernel's and Node's buffers, for `stalledMs`. */
  checkStalled(connection: C, now: number): void {
    // Nothing waiting to be written counts as keeping up: the time runs from when answers start to wait.
    if (connection.wire.writableLength === 0) connection.progressAt = now;
    else if (now - connection.progressAt >= this.#perConnection.stalledMs) this.overrun(connection, 'answers not read');
  }

  /** Closes a connection for overrunning its bounds; always false, for #admitsAnother. */
  overrun(connection: C, why: ConnectionOverrun): false {
    if (connection.wire.destroyed) return false;
    this.forget(connection);
    this.#events.overran(connection, why);
    destroyWithoutStackTraces(connection.wire);
    return false;
  }

  #answersFell(pending: number, inFlight: number): void {
    this.#pending -= pending;
    this.#inFlight -= inFlight;
    if (this.#pipeliningShut && this.#pending <= this.#limits.pending / 2) this.#pipeliningShut = false;
    if (inFlight > 0 && this.#turns.size > 0) this.#scheduleTurns();
  }

  #stopPipelining(connection: C): void {
    if (!connection.pipelining) return;
    connection.pipelining = false;
    this.#pipelining -= 1;
  }

  #start(connection: C, request: IncomingMessage, response: ServerResponse): void {
    connection.handled.set(request, response);
    this.#inFlight += 1;
    response.once('close', answered);
    this.#handler(request, response);
  }

  /** A started request's answer is done, or its connection closed (its response's 'close'). */
  answered(connection: C, request: IncomingMessage, response: ServerResponse): void {
    if (!connection.handled.delete(request)) return;
    const counted = connection.uncounted?.delete(response) !== true;
    if (counted && !connection.gone) this.#answersFell(1, 1);
    connection.progressAt = performance.now();
    if (connection.head < connection.queue.length) this.#scheduleRelease(connection);
    else if (connection.handled.size === 0) {
      this.#stopPipelining(connection);
      if (!connection.gone) this.#events.idle(connection);
    }
  }

  /** Starts the connection's waiting requests in the check phase, once per turn of the event loop. */
  #scheduleRelease(connection: C): void {
    if (connection.releaseScheduled) return;
    connection.releaseScheduled = true;
    setImmediate(() => {
      connection.releaseScheduled = false;
      this.#startWaiting(connection);
    });
  }

  #mayStart(connection: C): boolean {
    return connection.handled.size < this.#perConnection.handledAtOnce && connection.wire.writableLength <= this.#perConnection.bufferedBytes;
  }

  /** Starts waiting handlers while the connection has room for them, or queues it for its address's turn. */
  #startWaiting(connection: C): void {
    if (connection.gone) return;
    while (connection.head < connection.queue.length && this.#mayStart(connection)) {
      if (this.#inFlight >= this.#limits.inFlight || this.#turns.size > 0) {
        this.#askTurn(connection);
        break;
      }
      this.#startNext(connection);
    }
  }

  #startNext(connection: C): void {
    const [request, response] = connection.queue[connection.head] as readonly [IncomingMessage, ServerResponse];
    connection.head += 1;
    if (connection.head === connection.queue.length) {
      connection.queue = [];
      connection.head = 0;
    }
    this.#start(connection, request, response);
  }

  #askTurn(connection: C): void {
    if (connection.ready) return;
    connection.ready = true;
    const waiting = this.#turns.get(connection.address);
    if (waiting) waiting.push(connection);
    else this.#turns.set(connection.address, [connection]);
    if (this.#inFlight < this.#limits.inFlight) this.#scheduleTurns();
  }

  #scheduleTurns(): void {
    if (this.#turnsScheduled) return;
    this.#turnsScheduled = true;
    setImmediate(() => {
      this.#turnsScheduled = false;
      this.#takeTurns();
    });
  }

  /** Starts one waiting request of each address in turn while handlers have room. */
  #takeTurns(): void {
    while (this.#inFlight < this.#limits.inFlight && this.#turns.size > 0) {
      const [address, waiting] = this.#turns.entries().next().value as [string, C[]];
      this.#turns.delete(address);
      const connection = waiting.shift() as C;
      connection.ready = false;
      if (!connection.gone && connection.head < connection.queue.length && this.#mayStart(connection)) {
        this.#startNext(connection);
        if (connection.head < connection.queue.length && this.#mayStart(connection)) {
          connection.ready = true;
          waiting.push(connection);
        }
      }
      // The address goes to the back of the turn.
      if (waiting.length > 0) this.#turns.set(address, waiting);
    }
  }
}
