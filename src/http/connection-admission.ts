import type { Server, Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { Connection, type Book, type Waiting } from './address-book.js';
import { clientAddress } from './client-address.js';
import { CONNECTION, connectionOf, type ConnectionLimits, type ConnectionOverrun, type InstanceRequestLimits } from './connection-bounds.js';
import { connectionToClose, connectionToEvict, shouldYield } from './connection-eviction.js';
import { ConnectionRefusals, LINGER_MS, type Refusal } from './connection-refusal.js';
import { interposeConnections, tcpSocketOf } from './node-internals.js';
import { RequestBounds } from './request-bounds.js';

/** What the instance (this thread's share of it) serves at once, and what waits. */
export interface AdmissionLimits extends InstanceRequestLimits {
  /** Connections served at once: read, parsed, answered (MAX_CONNECTIONS). */
  readonly connections: number;
  /** Connections accepted and waiting, unread, for a slot (MAX_QUEUED_CONNECTIONS). */
  readonly queued: number;
  /** How long a connection waits for a slot at most before it is answered 503 (HEADERS_TIMEOUT_MS + KEEP_ALIVE_TIMEOUT_MS). */
  readonly queueTimeoutMs: number;
}

export interface AdmissionEvents {
  /** A connection was answered 503 + Retry-After and closed, unread. */
  refused(address: string, why: Refusal): void;
  /** An idle connection was closed to make room for one waiting. */
  evicted(address: string): void;
  /** A served connection was closed for overrunning its bounds. */
  overran(socket: Socket, why: ConnectionOverrun): void;
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** How often waiting connections are timed out and stalled ones looked for. */
const SWEEP_INTERVAL_MS = 250;

/**
 * The instance's connections, one record per connection (a Connection, whose requests RequestBounds bounds and
 * starts in turn: src/http/request-bounds.ts), shared work-conservingly: a share binds only when there is
 * contention.
 *
 * A connection is served at once while the instance serves fewer than `connections`, however many of them its
 * address holds. When the instance is full, an idle connection (nothing parsed and unanswered) makes room at once for
 * one waiting: first an idle keep-alive one of the waiting connection's own address, then an idle one of the address
 * holding the most (more than the waiting address would with this one); a trusted proxy's are not taken for others. Otherwise it waits,
 * accepted but unread (its request stays in the kernel's buffers), and the waiting addresses get slots in turn: as
 * many busy connections as there are waiting, of the waiting one's own address or of the address holding the most,
 * answer `Connection: close`, and each slot passes on after that answer without a reset. Past `queued` waiting (the
 * newest of the address with the most waiting is the one refused), or after `queueTimeoutMs`, a connection is
 * answered 503 with Retry-After, unread, never reset.
 */
export class ConnectionAdmission {
  readonly #limits: AdmissionLimits;
  readonly #requests: RequestBounds<Connection>;
  readonly #exempt: (address: string) => boolean;
  readonly #events: AdmissionEvents;
  readonly #refusals: ConnectionRefusals;
  readonly #books = new Map<string, Book>();
  /** Addresses with connections waiting, in the order they get slots. */
  readonly #waitingTurns = new Map<string, Book>();
  #served = 0;
  #waitingCount = 0;
  /** Connections whose answer says `Connection: close` for one waiting, not yet closed. */
  #closingCount = 0;
  #sweeper: NodeJS.Timeout | undefined;

  /**
   * `refusal` is the whole HTTP answer a refused connection gets, by why it is refused; undefined (with TLS, where
   * nothing can be said before a handshake) closes it unanswered.
   */
  constructor(
    limits: AdmissionLimits,
    perConnection: ConnectionLimits,
    handler: Handler,
    exempt: (address: string) => boolean,
    events: AdmissionEvents,
    refusal: (why: Refusal) => string | undefined,
  ) {
    this.#limits = limits;
    this.#requests = new RequestBounds<Connection>(perConnection, limits, handler, {
      parsed: (connection, response, first) => this.#parsed(connection, response, first),
      idle: (connection) => this.#becameIdle(connection),
      overran: (connection, why) => {
        this.#events.overran(connection.wire, why);
        this.shedWaiting(connection.address);
      },
    });
    this.#exempt = exempt;
    this.#events = events;
    this.#refusals = new ConnectionRefusals(limits, (address, why) => events.refused(address, why), refusal);
  }

  /** Connections served now. */
  get served(): number {
    return this.#served;
  }

  /** Connections waiting for a slot now. */
  get waiting(): number {
    return this.#waitingCount;
  }

  /** Requests parsed and not yet answered, over every open connection. */
  get pending(): number {
    return this.#requests.pending;
  }

  /** Puts this admission in front of `server`'s HTTP (or TLS) handling; `handle` is to be its request listener. */
  install(server: Server): void {
    interposeConnections(server, (socket, serve) => this.accept(socket, serve));
    // With TLS, requests come on the TLS socket over the TCP socket that was admitted.
    server.prependListener('secureConnection', (socket: TLSSocket) => {
      const tcp = tcpSocketOf(socket) as (Socket & { [CONNECTION]?: Connection }) | undefined;
      const connection = tcp?.[CONNECTION];
      if (!connection) return;
      connection.wire = socket;
      (socket as TLSSocket & { [CONNECTION]?: Connection })[CONNECTION] = connection;
      socket.on('drain', () => this.#requests.progressed(connection));
    });
    server.on('close', () => this.stop());
  }

  /** Stops the sweeper; the server calls it when it closes. */
  stop(): void {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  /** An accepted socket: served now through `serve`, left waiting, or refused. */
  accept(socket: Socket, serve: () => void): void {
    const book = this.#bookOf(clientAddress(socket));
    socket.on('error', () => undefined);
    if (this.#served < this.#limits.connections || this.#makeRoom(book)) {
      this.#serve(socket, book, serve);
      return;
    }
    if (this.#waitingCount >= this.#limits.queued && !this.#refuseFromLongestQueue(book)) {
      this.#refusals.refuse(socket, book.address, 'queue full');
      this.#dropIfEmpty(book);
      return;
    }
    const waiting: Waiting = { socket, book, since: performance.now(), serve };
    book.waiting.push(waiting);
    this.#waitingTurns.set(book.address, book);
    this.#waitingCount += 1;
    this.#passSlotTo(book);
    socket.once('close', () => this.#dequeue(waiting));
    this.#startSweeper();
  }

  /**
   * A connection from `address` overran its bounds: the address is flooding, and what it has waiting is most likely
   * more of the same, so each of those is answered 503 now, unread. A trusted proxy's are left waiting.
   */
  shedWaiting(address: string): void {
    const book = this.#books.get(address);
    if (!book || book.exempt) return;
    for (const waiting of [...book.waiting]) if (this.#dequeue(waiting)) this.#refusals.refuse(waiting.socket, address, 'address overran');
  }

  /** The server's request listener. */
  readonly handle: Handler = (request, response) => {
    const connection = connectionOf(request.socket) as Connection | undefined;
    if (connection) this.#requests.handle(connection, request, response);
  };

  /** A request counted on `connection`: it is busy, and may be told to close after its answer for one waiting. */
  #parsed(connection: Connection, response: ServerResponse, first: boolean): void {
    if (first) {
      connection.book.idle.delete(connection);
      connection.book.fresh.delete(connection);
    }
    if (this.#waitingCount > this.#closingCount && shouldYield(connection, this.#waitingTurns.values())) this.#closeAfter(connection, response);
  }

  #bookOf(address: string): Book {
    let book = this.#books.get(address);
    if (!book) this.#books.set(address, (book = { address, exempt: this.#exempt(address), served: new Set(), idle: new Set(), fresh: new Set(), waiting: [] }));
    return book;
  }

  #dropIfEmpty(book: Book): void {
    if (book.served.size === 0 && book.waiting.length === 0 && this.#books.get(book.address) === book) this.#books.delete(book.address);
  }

  #serve(socket: Socket, waitedIn: Book, serve: () => void): void {
    // Dequeuing an address's last waiting connection drops its book when nothing of it is served: the connection is
    // served under the address's book as it is now, so the sweep and the shares see it.
    const book = this.#bookOf(waitedIn.address);
    const connection = new Connection(this.#requests, socket, book);
    (socket as Socket & { [CONNECTION]?: Connection })[CONNECTION] = connection;
    book.served.add(connection);
    book.fresh.add(connection);
    this.#served += 1;
    socket.on('drain', () => this.#requests.progressed(connection));
    socket.once('close', () => this.#closed(connection));
    this.#startSweeper();
    serve();
  }

  /** Closes an idle connection so that one of `book`'s can be served (connectionToEvict), if there is one to close. */
  #makeRoom(book: Book): boolean {
    const victim = connectionToEvict(book, this.#books.values());
    if (!victim) return false;
    this.#evict(victim);
    return true;
  }

  /**
   * Closes an idle connection for one waiting, whom the caller serves in its slot at once. It is ended, not destroyed,
   * so that an answer just written still reaches its client.
   */
  #evict(connection: Connection): void {
    this.#events.evicted(connection.book.address);
    this.#requests.forget(connection);
    this.#release(connection, false);
    connection.wire.end();
    setTimeout(() => connection.wire.destroy(), LINGER_MS).unref();
  }

  /** Its answer, not yet begun, says `Connection: close`, and Node closes it after: its slot passes on without a reset. */
  #closeAfter(connection: Connection, response: ServerResponse): void {
    response.setHeader('connection', 'close');
    connection.closing = true;
    this.#closingCount += 1;
  }

  /**
   * One of `book`'s connections waits: a busy connection of its own address, else of the address holding the most,
   * whose answer has not begun, is told to close after it (the idle ones were looked at as it was accepted).
   */
  #passSlotTo(book: Book): void {
    if (this.#waitingCount <= this.#closingCount) return;
    const busy = connectionToClose(book, this.#books.values());
    if (busy) this.#closeAfter(busy.connection, busy.response);
  }

  /** Gives up the connection's slot (closed, or evicted and closing) and serves what waits. */
  #release(connection: Connection, admit = true): void {
    if (connection.released) return;
    connection.released = true;
    if (connection.closing) this.#closingCount -= 1;
    const { book } = connection;
    book.served.delete(connection);
    book.idle.delete(connection);
    book.fresh.delete(connection);
    this.#served -= 1;
    if (admit) this.#admitWaiting();
    this.#dropIfEmpty(book);
  }

  #closed(connection: Connection): void {
    this.#requests.closed(connection);
    this.#release(connection);
  }

  #becameIdle(connection: Connection): void {
    // A closing one is closed by Node after its answer.
    if (connection.released || connection.gone || connection.closing) return;
    connection.idleSince = performance.now();
    connection.book.idle.add(connection);
  }

  /** Serves waiting connections while there is room, the waiting addresses in turn. */
  #admitWaiting(): void {
    while (this.#waitingCount > 0 && this.#served < this.#limits.connections) {
      const book = this.#waitingTurns.values().next().value as Book;
      const waiting = book.waiting[0] as Waiting;
      this.#dequeue(waiting);
      // The address goes to the back of the turn.
      if (book.waiting.length > 0) {
        this.#waitingTurns.delete(book.address);
        this.#waitingTurns.set(book.address, book);
      }
      this.#serve(waiting.socket, book, waiting.serve);
    }
  }

  /** Removes a waiting connection from its queue (served, refused, or closed by its client). */
  #dequeue(waiting: Waiting): boolean {
    const { book } = waiting;
    const index = book.waiting.indexOf(waiting);
    if (index < 0) return false;
    book.waiting.splice(index, 1);
    if (book.waiting.length === 0) {
      this.#waitingTurns.delete(book.address);
      this.#dropIfEmpty(book);
    }
    this.#waitingCount -= 1;
    return true;
  }

  /** The queue is full: the newest waiting connection of the address with the most waiting is refused instead, if that has more than `book` would. */
  #refuseFromLongestQueue(book: Book): boolean {
    const own = book.waiting.length + 1;
    let longest: Book | undefined;
    for (const other of this.#waitingTurns.values()) if (!longest || other.waiting.length > longest.waiting.length) longest = other;
    if (!longest || longest.waiting.length <= own) return false;
    const waiting = longest.waiting.at(-1) as Waiting;
    if (this.#dequeue(waiting)) this.#refusals.refuse(waiting.socket, waiting.book.address, 'queue full');
    return true;
  }

  #startSweeper(): void {
    this.#sweeper ??= setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS).unref();
  }

  /** Times out connections waiting too long, makes room for the rest, and closes connections whose answers stall. */
  #sweep(): void {
    const now = performance.now();
    for (const book of [...this.#waitingTurns.values()]) {
      for (const waiting of [...book.waiting]) {
        if (now - waiting.since >= this.#limits.queueTimeoutMs && this.#dequeue(waiting)) this.#refusals.refuse(waiting.socket, book.address, 'waited too long');
      }
    }
    for (const book of [...this.#waitingTurns.values()]) {
      const waiting = book.waiting[0];
      if (!waiting || !this.#makeRoom(book)) continue;
      this.#dequeue(waiting);
      this.#serve(waiting.socket, book, waiting.serve);
    }
    for (const book of this.#books.values()) {
      for (const connection of book.served) {
        connection.sweeps += 1;
        this.#requests.checkStalled(connection, now);
      }
    }
    if (this.#served === 0 && this.#waitingCount === 0) this.stop();
  }
}
