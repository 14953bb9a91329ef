import { BlockList, isIP, type Server, type Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { CONNECTION, type ConnectionLimits, type ConnectionOverrun, type CountedConnection } from './connection-bounds.js';
import { destroyWithoutStackTraces, interposeConnections, tcpSocketOf } from './node-internals.js';

/** What the instance (this thread's share of it) serves at once, and what waits. */
export interface AdmissionLimits {
  /** Connections served at once: read, parsed, answered (MAX_CONNECTIONS). */
  readonly connections: number;
  /** Connections accepted and waiting, unread, for a slot (MAX_QUEUED_CONNECTIONS). */
  readonly queued: number;
  /** How long a connection waits for a slot at most before it is answered 503 (HEADERS_TIMEOUT_MS + KEEP_ALIVE_TIMEOUT_MS). */
  readonly queueTimeoutMs: number;
  /** Requests parsed and not answered over all connections (MAX_PENDING_REQUESTS). */
  readonly pending: number;
  /** Handlers running at once; past them requests start in turn by address. */
  readonly inFlight: number;
  /** Connections pipelining past `handledAtOnce` at once. */
  readonly pipelining: number;
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
  /** Its connections with a request waiting for a handler slot (`inFlight`), in the order they asked. */
  readonly ready: Connection[];
}

interface Waiting {
  readonly socket: Socket;
  readonly book: Book;
  readonly since: number;
  readonly serve: () => void;
}

/** One served connection: its slot, and what its requests hold. */
class Connection implements CountedConnection {
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
  /** In its book's `ready`. */
  ready = false;
  pipelining = false;
  /** Its requests no longer count: it is closing. */
  gone = false;
  /** It no longer holds a slot: closed, or evicted and closing. */
  released = false;
  /** A sweep has seen it: the event loop has had a turn to read what its client sent as it connected. */
  looked = false;
  /** Its current answer says `Connection: close`: its slot passes on to one waiting after it. */
  closing = false;
  /** When its last answer ended. */
  idleSince = 0;

  constructor(
    readonly owner: ConnectionAdmission,
    readonly socket: Socket,
    readonly book: Book,
  ) {
    this.wire = socket;
  }

  get unanswered(): number {
    return this.handled.size + this.queue.length - this.head;
  }

  stopCounting(response: ServerResponse): void {
    this.owner.stopCounting(this, response);
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

/** The one 'close' listener of every started response: no closure per request. */
function answered(this: ServerResponse): void {
  const request = this.req;
  const connection = (request.socket as Socket & { [CONNECTION]?: Connection })[CONNECTION];
  connection?.owner.answered(connection, request, this);
}

function first<T>(set: Set<T>): T | undefined {
  for (const item of set) return item;
  return undefined;
}

/**
 * The instance's connections and what their requests hold, in one record per connection (work-conserving: a share
 * binds only when there is contention).
 *
 * Slots. A connection is served at once while the instance serves fewer than `connections`, however many of them its
 * address holds. When the instance is full, an idle connection (nothing parsed and unanswered) makes room at once for
 * one waiting: first one of the waiting connection's own address, then one of the address holding the most (more
 * than the waiting address would with this one); a trusted proxy's are not taken for others. Otherwise it waits,
 * accepted but unread (its request stays in the kernel's buffers), and the waiting addresses get slots in turn: as
 * many busy connections as there are waiting, of the waiting one's own address or of the address holding the most,
 * answer `Connection: close`, and each slot passes on after that answer without a reset. Past `queued` waiting (the newest of the address with the most waiting is
 * the one refused), or after `queueTimeoutMs`, a connection is answered 503 with Retry-After, unread, never reset.
 *
 * Requests. At most `handledAtOnce` handlers of a connection run at once, and none starts while its socket has more
 * than `bufferedBytes` unwritten; more than `unanswered` requests ahead close it, and so does a connection whose
 * answers wait unread for `stalledMs`. Over all connections, more than `pending` requests parsed close the connection
 * that pipelines past them, and at most `inFlight` handlers run: past that, requests start in turn by address, so a
 * client on a thousand connections gets the same turns as one on ten. A connection's first request starts at once
 * from Node's request event; a pipelined one, or one that waits its turn, starts from the check phase
 * (`#scheduleRelease`), so that a connection that overruns within one socket read runs no further handler.
 */
export class ConnectionAdmission {
  readonly #limits: AdmissionLimits;
  readonly #perConnection: ConnectionLimits;
  readonly #handler: Handler;
  readonly #exempt: (address: string) => boolean;
  readonly #events: AdmissionEvents;
  readonly #refusal: (why: Refusal) => string | undefined;
  readonly #books = new Map<string, Book>();
  /** Addresses with connections waiting, in the order they get slots. */
  readonly #waitingTurns = new Map<string, Book>();
  /** Addresses with requests waiting for a handler slot, in the order they get them. */
  readonly #readyTurns = new Map<string, Book>();
  #served = 0;
  #waitingCount = 0;
  /** Connections whose answer says `Connection: close` for one waiting, not yet closed. */
  #closingCount = 0;
  #lingering = 0;
  #pending = 0;
  #inFlight = 0;
  #pipelining = 0;
  /** Pipelining is refused while the requests held stay above half of `pending` after one overran it. */
  #pipeliningShut = false;
  #turnsScheduled = false;
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
    this.#perConnection = perConnection;
    this.#handler = handler;
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
    return this.#pending;
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
      socket.on('drain', () => this.#progressed(connection));
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
    const connection = this.#connectionOf(request.socket);
    // Parsed on a connection already closed (Node finishes parsing the read it is in): nobody waits for its answer.
    if (!connection || connection.gone) return;
    const unanswered = connection.unanswered;
    if (unanswered > 0 && !this.#admitsAnother(connection, unanswered)) return;
    if (unanswered === 0) {
      connection.book.idle.delete(connection);
      connection.book.fresh.delete(connection);
    }
    this.#pending += 1;
    if (this.#waitingCount > this.#closingCount && this.#shouldYield(connection)) this.#closeAfter(connection, response);
    if (unanswered === 0 && this.#inFlight < this.#limits.inFlight && this.#readyTurns.size === 0) {
      this.#start(connection, request, response);
      return;
    }
    connection.queue.push([request, response]);
    this.#scheduleRelease(connection);
  };

  /** Whether `connection` may have one more request beyond the `unanswered` it has; if not, it is closed. */
  #admitsAnother(connection: Connection, unanswered: number): boolean {
    const limits = this.#perConnection;
    if (unanswered >= limits.unanswered) return this.#overrun(connection, 'too many unanswered requests');
    if (unanswered >= limits.handledAtOnce && this.#pipeliningShut) return this.#overrun(connection, 'the server holds too many unanswered requests');
    if (unanswered >= limits.handledAtOnce && !connection.pipelining) {
      if (this.#pipelining >= this.#limits.pipelining) return this.#overrun(connection, 'too many connections pipelining');
      connection.pipelining = true;
      this.#pipelining += 1;
    }
    if (this.#pending >= this.#limits.pending) {
      // The connection that brought the request is closed, not the one holding the most: Node parses every socket
      // read of a turn of the event loop, each whole, before anything else runs, so only closing the connection being
      // parsed stops more requests being made. A connection's only request is let through: it is not what fills the
      // server, and closing it would reset a client that did nothing wrong.
      this.#overrun(connection, 'the server holds too many unanswered requests');
      if (unanswered >= limits.handledAtOnce && this.#pending > this.#limits.pending / 2) this.#pipeliningShut = true;
      return false;
    }
    return true;
  }

  /** Its request stops counting towards the pending requests and the handlers in flight (see stopCountingAsPending). */
  stopCounting(connection: Connection, response: ServerResponse): void {
    if (!connection.handled.has(response.req) || connection.uncounted?.has(response)) return;
    (connection.uncounted ??= new Set()).add(response);
    if (!connection.gone) this.#answersFell(1, 1);
  }

  #connectionOf(socket: Socket): Connection | undefined {
    return (socket as Socket & { [CONNECTION]?: Connection })[CONNECTION];
  }

  #bookOf(address: string): Book {
    let book = this.#books.get(address);
    if (!book) this.#books.set(address, (book = { address, exempt: this.#exempt(address), served: new Set(), idle: new Set(), fresh: new Set(), waiting: [], ready: [] }));
    return book;
  }

  #dropIfEmpty(book: Book): void {
    if (book.served.size === 0 && book.waiting.length === 0 && book.ready.length === 0) this.#books.delete(book.address);
  }

  #serve(socket: Socket, book: Book, serve: () => void): void {
    const connection = new Connection(this, socket, book);
    (socket as Socket & { [CONNECTION]?: Connection })[CONNECTION] = connection;
    book.served.add(connection);
    book.fresh.add(connection);
    this.#served += 1;
    socket.on('drain', () => this.#progressed(connection));
    socket.once('close', () => this.#closed(connection));
    this.#startSweeper();
    serve();
  }

  /**
   * Closes an idle connection so that one of `book`'s can be served: its own address's longest idle, else that of
   * the address holding the most connections, if it holds more than `book` would with one more.
   */
  #makeRoom(book: Book): boolean {
    let victim = this.#evictable(book);
    if (!victim) {
      let heaviest: Book | undefined;
      for (const other of this.#books.values()) {
        if (other.exempt || other.served.size <= book.served.size + 1 || (heaviest && other.served.size <= heaviest.served.size)) continue;
        const candidate = this.#evictable(other);
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
  #evictable(book: Book): Connection | undefined {
    const idle = first(book.idle);
    if (idle && performance.now() - idle.idleSince >= REUSE_GRACE_MS) return idle;
    const fresh = first(book.fresh);
    return fresh?.looked ? fresh : undefined;
  }

  /**
   * Closes an idle connection for one waiting, whom the caller serves in its slot at once. It is ended, not destroyed,
   * so that an answer just written still reaches its client.
   */
  #evict(connection: Connection): void {
    this.#events.evicted(connection.book.address);
    this.#forget(connection);
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
    this.#forget(connection);
    connection.queue = [];
    // Node aborts the requests and responses of a connection that closes, unless it stopped parsing as for an
    // upgrade (node-internals.ts), and then it leaves them be: the handlers that run end here all the same.
    for (const [request, response] of connection.handled) {
      request.destroy();
      response.destroy();
    }
    this.#release(connection);
  }

  /** Its requests stop counting: it is closing. */
  #forget(connection: Connection): void {
    this.#stopPipelining(connection);
    if (connection.gone) return;
    connection.gone = true;
    const counted = connection.handled.size - (connection.uncounted?.size ?? 0);
    this.#answersFell(counted + connection.queue.length - connection.head, counted);
  }

  #answersFell(pending: number, inFlight: number): void {
    this.#pending -= pending;
    this.#inFlight -= inFlight;
    if (this.#pipeliningShut && this.#pending <= this.#limits.pending / 2) this.#pipeliningShut = false;
    if (inFlight > 0 && this.#readyTurns.size > 0) this.#scheduleTurns();
  }

  #stopPipelining(connection: Connection): void {
    if (!connection.pipelining) return;
    connection.pipelining = false;
    this.#pipelining -= 1;
  }

  #start(connection: Connection, request: IncomingMessage, response: ServerResponse): void {
    connection.handled.set(request, response);
    this.#inFlight += 1;
    response.once('close', answered);
    this.#handler(request, response);
  }

  /** A started request's answer is done, or its connection closed (its response's 'close'). */
  answered(connection: Connection, request: IncomingMessage, response: ServerResponse): void {
    if (!connection.handled.delete(request)) return;
    const counted = connection.uncounted?.delete(response) !== true;
    if (counted && !connection.gone) this.#answersFell(1, 1);
    connection.progressAt = performance.now();
    if (connection.head < connection.queue.length) this.#scheduleRelease(connection);
    else if (connection.handled.size === 0) this.#becameIdle(connection);
  }

  #becameIdle(connection: Connection): void {
    this.#stopPipelining(connection);
    // A closing one is closed by Node after its answer.
    if (connection.released || connection.gone || connection.closing) return;
    connection.idleSince = performance.now();
    connection.book.idle.add(connection);
  }

  #progressed(connection: Connection): void {
    connection.progressAt = performance.now();
    if (connection.head < connection.queue.length) this.#scheduleRelease(connection);
  }

  /** Starts the connection's waiting requests in the check phase, once per turn of the event loop. */
  #scheduleRelease(connection: Connection): void {
    if (connection.releaseScheduled) return;
    connection.releaseScheduled = true;
    setImmediate(() => {
      connection.releaseScheduled = false;
      this.#startWaiting(connection);
    });
  }

  #mayStart(connection: Connection): boolean {
    return connection.handled.size < this.#perConnection.handledAtOnce && connection.wire.writableLength <= this.#perConnection.bufferedBytes;
  }

  /** Starts waiting handlers while the connection has room for them, or queues it for its address's turn. */
  #startWaiting(connection: Connection): void {
    if (connection.gone) return;
    while (connection.head < connection.queue.length && this.#mayStart(connection)) {
      if (this.#inFlight >= this.#limits.inFlight || this.#readyTurns.size > 0) {
        this.#askTurn(connection);
        break;
      }
      this.#startNext(connection);
    }
  }

  #startNext(connection: Connection): void {
    const [request, response] = connection.queue[connection.head] as readonly [IncomingMessage, ServerResponse];
    connection.head += 1;
    if (connection.head === connection.queue.length) {
      connection.queue = [];
      connection.head = 0;
    }
    this.#start(connection, request, response);
  }

  #askTurn(connection: Connection): void {
    if (connection.ready) return;
    connection.ready = true;
    connection.book.ready.push(connection);
    if (!this.#readyTurns.has(connection.book.address)) this.#readyTurns.set(connection.book.address, connection.book);
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
    while (this.#inFlight < this.#limits.inFlight && this.#readyTurns.size > 0) {
      const book = this.#readyTurns.values().next().value as Book;
      this.#readyTurns.delete(book.address);
      const connection = book.ready.shift() as Connection;
      connection.ready = false;
      if (!connection.gone && connection.head < connection.queue.length && this.#mayStart(connection)) {
        this.#startNext(connection);
        if (connection.head < connection.queue.length && this.#mayStart(connection)) {
          connection.ready = true;
          book.ready.push(connection);
        }
      }
      // The address goes to the back of the turn.
      if (book.ready.length > 0) this.#readyTurns.set(book.address, book);
      else this.#dropIfEmpty(book);
    }
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
        connection.looked = true;
        // Nothing waiting to be written counts as keeping up: the time runs from when answers start to wait.
        if (connection.wire.writableLength === 0) connection.progressAt = now;
        else if (now - connection.progressAt >= this.#perConnection.stalledMs) this.#overrun(connection, 'answers not read');
      }
    }
    if (this.#served === 0 && this.#waitingCount === 0) this.stop();
  }

  /** Closes a connection for overrunning its bounds; always false, for #admitsAnother. */
  #overrun(connection: Connection, why: ConnectionOverrun): false {
    if (connection.wire.destroyed) return false;
    this.#forget(connection);
    this.#events.overran(connection.wire, why);
    this.shedWaiting(connection.book.address);
    destroyWithoutStackTraces(connection.wire);
    return false;
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
