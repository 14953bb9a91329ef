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
   * connection, and Node parses no further request of that read (http-server.ts). Each one waiting costs its request
   * and response objects, so this is what a connection that never reads can make the server hold; it leaves room for
   * a client that pipelines a few hundred requests at once and reads the answers.
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

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** How a started request stops counting as pending (stopCountingAsPending), by its response. */
const uncounters = new WeakMap<ServerResponse, () => void>();

/**
 * The request of `response` stops counting towards the server's pending requests (MAX_PENDING_REQUESTS): its answer
 * is a stream that lasts as long as its connection (GET /plants/events), bounded by the stream limits and the
 * connection budget instead. Counted, 1,000 open streams would fill the bound, and every connection that pipelines
 * would be closed. It still counts on its own connection (`unanswered`, `handledAtOnce`).
 */
export function stopCountingAsPending(response: ServerResponse): void {
  uncounters.get(response)?.();
}

interface ConnectionState {
  /** Handlers started whose answers have not been handed to the kernel: their requests and responses. */
  readonly handled: Map<IncomingMessage, ServerResponse>;
  /** Parsed requests waiting for a handler, oldest first from `head` on (shifting an array is linear). */
  waiting: Array<readonly [IncomingMessage, ServerResponse]>;
  head: number;
  /** When an answer last left for the kernel (a response finished, or the socket drained). */
  progressAt: number;
  /** A release of this connection's waiting requests is scheduled (`#scheduleRelease`). */
  releaseScheduled: boolean;
  /** Closed, or being closed: its requests no longer count towards the server's pending total. */
  gone: boolean;
  /** It holds one of the pipelining slots: more than `handledAtOnce` of its requests were unanswered at once. */
  pipelining: boolean;
  /** Of `handled`, those that no longer count towards the pending total (stopCountingAsPending). */
  uncounted: number;
}

/**
 * The server's request handler, wrapped so that what one connection can make the server hold is bounded, however a
 * client pipelines and however slowly it reads (src/app.ts installs it through Fastify's serverFactory):
 * at most `handledAtOnce` handlers of a connection run at once, and none starts while its socket has more than
 * `bufferedBytes` unwritten; more than `unanswered` requests ahead close it; and a connection whose answers wait
 * unread for `stalledMs` is closed. Node's own back-pressure (it stops reading a socket whose answers exceed its
 * high-water mark) then keeps further requests in the kernel: it works once answers exist, which handlers that run
 * at once for every pipelined request would build ahead of it without bound.
 *
 * No handler starts from Node's request event itself, only from a release scheduled after the event loop's poll
 * phase (`#scheduleRelease`). Node parses a whole socket read in one go and emits a request for each request in it,
 * and the event loop reads every socket that has data before its check phase: a handler started from the event
 * would build its answer before the parser had reached the request that overruns `unanswered`, and a flood of large
 * answers (a page of a thousand plants each) built so, by connections about to be closed, cost more memory than all
 * their parsed requests. Released later, a connection that overruns within what the event loop read runs no handler
 * at all; and between two releases of one connection the event loop reads and serves the others.
 *
 * Answers keep the order of their requests: Node queues responses per connection, and waiting handlers start in
 * the order their requests came.
 */
export class ConnectionBounds {
  readonly #handler: Handler;
  readonly #limits: ConnectionLimits;
  readonly #maxPending: number;
  readonly #maxPipelining: number;
  /** Connections holding a pipelining slot. */
  #pipelining = 0;
  /**
   * No connection may have more than `handledAtOnce` requests unanswered: a pipelining connection was closed for
   * `maxPending`, and the server still holds more than half of it. Without this, each connection a flood opens next
   * parses as many requests as the room left under `maxPending` before it is closed for the same bound, all of them
   * dying unanswered; with it, a handful. Pipelining is
   * allowed again once the requests held fall to half of `maxPending`: clients that wait for each answer never notice.
   */
  #pipeliningShut = false;
  readonly #onOverrun: (socket: Socket, why: ConnectionOverrun) => void;
  readonly #connections = new Map<Socket, ConnectionState>();
  /** Requests of every connection still open that are parsed and not answered (handled or waiting). */
  #pending = 0;
  #sweeper: NodeJS.Timeout | undefined;

  /**
   * `maxPending` bounds the requests parsed and not answered over all connections together (MAX_PENDING_REQUESTS,
   * this thread's share of it): `unanswered` alone would let each of MAX_CONNECTIONS connections hold 512.
   */
  constructor(
    handler: Handler,
    limits: ConnectionLimits,
    onOverrun: (socket: Socket, why: ConnectionOverrun) => void,
    maxPending = Infinity,
    maxPipelining = Infinity,
  ) {
    this.#handler = handler;
    this.#limits = limits;
    this.#maxPending = maxPending;
    this.#maxPipelining = maxPipelining;
    this.#onOverrun = onOverrun;
  }

  /** Requests parsed and not yet answered, over every open connection. */
  get pending(): number {
    return this.#pending;
  }

  /** The server's request listener: the handler, bounded per connection and over all of them. */
  readonly handle: Handler = (request, response) => {
    const { socket } = request;
    const state = this.#stateOf(socket);
    // Parsed on a connection already closed (Node finishes parsing the read it is in): nobody waits for its answer.
    if (state.gone) return;
    const unanswered = state.handled.size + state.waiting.length - state.head;
    if (unanswered >= this.#limits.unanswered) {
      this.#overrun(socket, 'too many unanswered requests');
      return;
    }
    if (unanswered >= this.#limits.handledAtOnce && this.#pipeliningShut) {
      this.#overrun(socket, 'the server holds too many unanswered requests');
      return;
    }
    if (unanswered >= this.#limits.handledAtOnce && !state.pipelining) {
      if (this.#pipelining >= this.#maxPipelining) {
        // Closed at once, like an overrun: the rest of what it sent in this read is not parsed (http-server.ts).
        this.#overrun(socket, 'too many connections pipelining');
        return;
      }
      state.pipelining = true;
      this.#pipelining += 1;
    }
    // A connection's only request is let through past the bound (the overshoot is at most one request per
    // connection): it is not what fills the server, and closing it would reset a client that did nothing wrong.
    if (this.#pending >= this.#maxPending && unanswered > 0) {
      // The connection that brought the request is closed, not the one holding the most: Node parses every socket
      // read of a turn of the event loop, each whole, before anything else runs, so only closing the connection being
      // parsed stops more requests being made (http-server.ts); closing another frees nothing until the garbage
      // collector runs, and 400 connections parsing 409 requests each made 160,000 requests in one turn.
      this.#overrun(socket, 'the server holds too many unanswered requests');
      // Its own requests no longer count (#overrun): pipelining stops if the others still hold most of the bound.
      if (unanswered >= this.#limits.handledAtOnce && this.#pending > this.#maxPending / 2) this.#pipeliningShut = true;
      return;
    }
    state.waiting.push([request, response]);
    this.#pending += 1;
    this.#scheduleRelease(socket, state);
  };

  /** Stops the timer that closes stalled connections; the server calls it when it closes. */
  stop(): void {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  #stateOf(socket: Socket): ConnectionState {
    let state = this.#connections.get(socket);
    if (!state) {
      state = { handled: new Map(), waiting: [], head: 0, progressAt: performance.now(), releaseScheduled: false, gone: false, pipelining: false, uncounted: 0 };
      this.#connections.set(socket, state);
      const progressed = () => {
        (state as ConnectionState).progressAt = performance.now();
        this.#scheduleRelease(socket, state as ConnectionState);
      };
      socket.on('drain', progressed);
      socket.once('close', () => {
        this.#connections.delete(socket);
        this.#forget(state as ConnectionState);
        (state as ConnectionState).waiting = [];
        // Node aborts the requests and responses of a connection that closes, unless it stopped parsing as for an
        // upgrade (http-server.ts), and then it leaves them be: the handlers that run end here all the same.
        for (const [request, response] of (state as ConnectionState).handled) {
          request.destroy();
          response.destroy();
        }
      });
      this.#sweeper ??= setInterval(() => this.#sweep(), Math.min(1000, this.#limits.stalledMs)).unref();
    }
    return state;
  }

  #mayStart(socket: Socket, state: ConnectionState): boolean {
    return state.handled.size < this.#limits.handledAtOnce && socket.writableLength <= this.#limits.bufferedBytes;
  }

  #start(socket: Socket, state: ConnectionState, request: IncomingMessage, response: ServerResponse): void {
    state.handled.set(request, response);
    let counted = true;
    uncounters.set(response, () => {
      if (!counted || !state.handled.has(request)) return;
      counted = false;
      state.uncounted += 1;
      if (!state.gone) this.#pendingFell(1);
    });
    const answered = () => {
      if (!state.handled.delete(request)) return;
      if (!counted) state.uncounted -= 1;
      else if (!state.gone) this.#pendingFell(1);
      if (state.handled.size === 0 && state.head === state.waiting.length) this.#stopPipelining(state);
      state.progressAt = performance.now();
      this.#scheduleRelease(socket, state);
    };
    response.once('finish', answered);
    response.once('close', answered);
    this.#handler(request, response);
  }

  /** Releases the connection's waiting requests in the check phase, once per turn of the event loop (see the class). */
  #scheduleRelease(socket: Socket, state: ConnectionState): void {
    if (state.releaseScheduled) return;
    state.releaseScheduled = true;
    setImmediate(() => {
      state.releaseScheduled = false;
      this.#release(socket, state);
    });
  }

  /** Starts waiting handlers while the connection has room for them. */
  #release(socket: Socket, state: ConnectionState): void {
    if (socket.destroyed) return;
    while (state.head < state.waiting.length && this.#mayStart(socket, state)) {
      const [request, response] = state.waiting[state.head] as readonly [IncomingMessage, ServerResponse];
      state.head += 1;
      this.#start(socket, state, request, response);
    }
    if (state.head === state.waiting.length) {
      state.waiting = [];
      state.head = 0;
    }
  }

  /** Closes connections whose answers have waited unread, in the kernel's and Node's buffers, for `stalledMs`. */
  #sweep(): void {
    const now = performance.now();
    for (const [socket, state] of this.#connections) {
      // Nothing waiting to be written counts as keeping up: the time runs from when answers start to wait.
      if (socket.writableLength === 0) state.progressAt = now;
      else if (now - state.progressAt >= this.#limits.stalledMs) this.#overrun(socket, 'answers not read');
    }
    if (this.#connections.size === 0) this.stop();
  }

  /** Gives back its pipelining slot, if it holds one: all its requests are answered, or it is closing. */
  #stopPipelining(state: ConnectionState): void {
    if (!state.pipelining) return;
    state.pipelining = false;
    this.#pipelining -= 1;
  }

  /** Its requests stop counting towards the pending total: the connection is closing, and with it they go. */
  #forget(state: ConnectionState): void {
    this.#stopPipelining(state);
    if (state.gone) return;
    state.gone = true;
    this.#pendingFell(state.handled.size - state.uncounted + state.waiting.length - state.head);
  }

  /** Requests stopped counting towards the pending total (answered, or their connection closed). */
  #pendingFell(by: number): void {
    this.#pending -= by;
    if (this.#pipeliningShut && this.#pending <= this.#maxPending / 2) this.#pipeliningShut = false;
  }

  #overrun(socket: Socket, why: ConnectionOverrun): void {
    if (socket.destroyed) return;
    const state = this.#connections.get(socket);
    if (state) this.#forget(state);
    this.#onOverrun(socket, why);
    // When the socket closes, Node aborts every request it parsed and did not answer, each with an Error of its own,
    // and capturing those stack traces cost more CPU and memory than everything else the flood made the server do
    // (over a thousand requests from one 64 KiB read). Nobody reads them: the client is gone and the requests were
    // never handed to a handler, so they are made without a stack, around Node's own 'close' listener only.
    let stackTraceLimit: number | undefined;
    const restore = () => {
      if (stackTraceLimit === undefined) return;
      Error.stackTraceLimit = stackTraceLimit;
      stackTraceLimit = undefined;
    };
    socket.prependOnceListener('close', () => {
      stackTraceLimit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      // Restored after the listeners, and in any case before anything else runs.
      process.nextTick(restore);
    });
    socket.once('close', restore);
    socket.destroy();
  }
}
