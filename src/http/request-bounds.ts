import type { IncomingMessage, ServerResponse } from 'node:http';
import { connectionOf, type ConnectionLimits, type ConnectionOverrun, type ConnectionRequests, type InstanceRequestLimits } from './connection-bounds.js';
import { destroyWithoutStackTraces } from './node-internals.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** What RequestBounds tells the connection bookkeeping. */
export interface RequestEvents<C extends ConnectionRequests> {
  /** A request was parsed and is counted; `first` when the connection had none unanswered. */
  parsed(connection: C, response: ServerResponse, first: boolean): void;
  /** The connection has nothing unanswered any more. */
  idle(connection: C): void;
  /** The connection is closed for overrunning its bounds. */
  overran(connection: C, why: ConnectionOverrun): void;
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