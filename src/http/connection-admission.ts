import { BlockList, isIP, type Server, type Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { CONNECTION, connectionOf, ConnectionRequests, type ConnectionLimits, type ConnectionOverrun, type InstanceRequestLimits } from './connection-bounds.js';
import { RequestBounds } from './request-bounds.js';
import { interposeConnections, tcpSocketOf } from './node-internals.js';

/** What the instance (this thread's share of it) serves at once, and what waits. */
export interface AdmissionLimits extends InstanceRequestLimits {
  /** Connections served at once: read, parsed, answered (MAX_CONNECTIONS). */
  readonly connections: number;
  /** Connections accepted and waiting, unread, for a slot (MAX_QUEUED_CONNECTIONS). */
  readonly queued: number;
  /** How long a connection waits for a slot at most before it is answered 503 (HEADERS_TIMEOUT_MS + KEEP_ALIVE_TIMEOUT_MS). */
  readonly queueTimeoutMs: number;
}

/** Why a connection was answered 503 instead of being served. */
export type Refusal = 'queue full' | 'waited too long' | 'address overran';

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
/** How long a refused or evicted connection is left to read what it was sent before it is destroyed. */
const LINGER_MS = 1000;
/**
 * How long a connection idle after an answer is left to its client before it may be closed for one waiting: a client
 * with more to send reuses it the moment its answer arrives, and would see it closed under its next request. Not a
 * share of anyone's time: a connection busy when others start waiting is told to close after its answer instead.
 */
const REUSE_GRACE_MS = 20;

/** Everything known of one client address. */
interface Book {
  readonly address: string;
  readonly exempt: boolean;
  /** Its connections served; of them those idle after an answer, and those that have sent no request yet, oldest first. */
  readonly served: Set<Connection>;
  readonly idle: Set<Connection>;
  readonly fresh: Set<Connection>;
  /** Its connections waiting for a slot, oldest first. */
  readonly waiting: Waiting[];
}

interface Waiting {
  readonly socket: Socket;
  readonly book: Book;
  readonly since: number;
  readonly serve: () => void;
}

/** One served connection: its slot, and (ConnectionRequests) what its requests hold. */
class Connection extends ConnectionRequests {
  /** It no longer holds a slot: closed, or evicted and closing. */
  released = false;
  /**
   * Sweeps that have seen it: after two, the event loop has had a turn (a poll phase) since it was served, and has
   * read what its client sent as it connected.
   */
  sweeps = 0;
  /** Its current answer says `Connection: close`: its slot passes on to one waiting after it. */
  closing = false;
  /** When its last answer ended. */
  idleSince = 0;

  constructor(
    bounds: RequestBounds<Connection>,
    readonly socket: Socket,
    readonly book: Book,
  ) {
    super(bounds, book.address, socket);
  }
}

/** The address a connection is counted under: an IPv4 client on a dual-stack listener as its IPv4 address. */
export function clientAddress(socket: Socket): string {
  const address = socket.remoteAddress ?? '';
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/** TRUST_PROXY's entries (validated by src/config/) as a set of addresses a connection can be checked against. */
export function trustedProxies(entries: readonly string[]): (address: string) => boolean {
  if (entries.length === 0) return () => false;
  const list = new BlockList();
  for (const entry of entries) {
    if (entry === 'loopback') {
      list.addSubnet('127.0.0.0', 8, 'ipv4');
      list.addAddress('::1', 'ipv6');
      continue;
    }
    const [address = '', prefix] = entry.split('/');
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  }
  return (address) => {
    const family = isIP(address);
    return family !== 0 && list.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
}

function first<T>(set: Set<T>): T | undefined {
  for (const item of set) return item;
  return undefined;
}

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
  readonly #refusal: (why: Refusal) => string | undefined;
  readonly #books = new Map<string, Book>();
  /** Addresses with connections waiting, in the order they get slots. */
  readonly #waitingTurns = new Map<string, Book>();
  #served = 0;
  #waitingCount = 0;
  /** Connections whose answer says `Connection: close` for one waiting, not yet closed. */
  #closingCount = 0;
  #lingering = 0;
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
    this.#refusal = refusal;
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
      this.#refuse(socket, book.address, 'queue full');
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
    for (const waiting of [...book.waiting]) if (this.#dequeue(waiting)) this.#refuse(waiting.socket, address, 'address overran');
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
    if (this.#waitingCount > this.#closingCount && this.#shouldYield(connection)) this.#closeAfter(connection, response);
  }

  #bookOf(address: string): Book {
    let book = this.#books.get(address);
    if (!book) this.#books.set(address, (book = { address, exempt: this.#exempt(address), served: new Set(), idle: new Set(), fresh: new Set(), waiting: [] }));
    return book;
  }

  #dropIfEmpty(book: Book): void {
    if (book.served.size === 0 && book.waiting.length === 0) this.#books.delete(book.address);
  }

  #serve(socket: Socket, book: Book, serve: () => void): void {
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

  /**
   * Closes an idle connection so that one of `book`'s can be served: its own address's longest idle keep-alive one,
   * else the longest idle of the address holding the most connections, if it holds more than `book` would with one
   * more.
   */
  #makeRoom(book: Book): boolean {
    // Of its own address, only one idle after an answer: its client has moved on to the new connection. One that has
    // sent nothing is no more use than the newcomer, and replacing it would let an address that opens silent
    // connections churn its own for ever, none old enough to be taken for anyone else.
    let victim = this.#evictable(book, false);
    if (!victim) {
      let heaviest: Book | undefined;
      for (const other of this.#books.values()) {
        if (other.exempt || other.served.size <= book.served.size + 1 || (heaviest && other.served.size <= heaviest.served.size)) continue;
        const candidate = this.#evictable(other, true);
        if (candidate) {
          heaviest = other;
          victim = candidate;
        }
      }
    }
    if (!victim) return false;
    this.#evict(victim);
    return true;
  }

  /**
   * The book's idle connection to close first: the longest idle after an answer (past REUSE_GRACE_MS), else the oldest
   * that has sent nothing, once the event loop has had a turn to read it (a client sends its request as it connects,
   * so one admitted an instant ago is idle only because it has not been read yet).
   */
  #evictable(book: Book, fresh: boolean): Connection | undefined {
    const idle = first(book.idle);
    if (idle && performance.now() - idle.idleSince >= REUSE_GRACE_MS) return idle;
    return fresh ? this.#seenTwice(book) : undefined;
  }

  #seenTwice(book: Book): Connection | undefined {
    const fresh = first(book.fresh);
    return fresh !== undefined && fresh.sweeps >= 2 ? fresh : undefined;
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

  /**
   * Whether `connection` should give its slot to a waiting one after its current answer: its address has some
   * waiting, or holds more connections than a waiting address would with this slot.
   */
  #shouldYield(connection: Connection): boolean {
    if (connection.closing) return false;
    const { book } = connection;
    if (book.waiting.length > 0) return true;
    if (book.exempt) return false;
    for (const other of this.#waitingTurns.values()) if (other.served.size + 1 < book.served.size) return true;
    return false;
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
    let heaviest: Book | undefined;
    for (const other of this.#books.values()) {
      if (other.exempt || other.served.size <= book.served.size + 1 || (heaviest && other.served.size <= heaviest.served.size)) continue;
      heaviest = other;
    }
    for (const candidate of heaviest ? [book, heaviest] : [book]) {
      for (const connection of candidate.served) {
        if (connection.closing || connection.handled.size === 0) continue;
        for (const response of connection.handled.values()) {
          if (response.headersSent) continue;
          this.#closeAfter(connection, response);
          return;
        }
      }
    }
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
    if (this.#dequeue(waiting)) this.#refuse(waiting.socket, waiting.book.address, 'queue full');
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
        if (now - waiting.since >= this.#limits.queueTimeoutMs && this.#dequeue(waiting)) this.#refuse(waiting.socket, book.address, 'waited too long');
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

  /**
   * Answers 503 without reading the request, and half-closes. The request is then read and dropped until the client
   * closes, for at most LINGER_MS: closing a socket with unread bytes in its receive buffer makes the kernel send a
   * reset, which can reach the client before the answer does. Refused connections lingering at once are bounded by
   * `connections` + `queued`; past it, one is closed at once (an attack, not a client to tell anything).
   */
  #refuse(socket: Socket, address: string, why: Refusal): void {
    this.#events.refused(address, why);
    const answer = this.#refusal(why);
    if (answer === undefined || this.#lingering >= this.#limits.connections + this.#limits.queued) {
      socket.destroy();
      return;
    }
    this.#lingering += 1;
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
    socket.once('close', () => {
      this.#lingering -= 1;
      clearTimeout(timer);
    });
    socket.on('data', () => undefined);
    socket.on('end', () => socket.destroy());
    socket.end(answer);
    socket.resume();
  }
}
