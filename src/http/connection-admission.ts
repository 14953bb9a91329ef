import { BlockList, isIP, type Server, type Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** What the instance (this thread's share of it) serves at once, and what waits. */
export interface AdmissionLimits {
  /** Connections served at once: read, parsed, answered (MAX_CONNECTIONS). */
  readonly connections: number;
  /** Connections one client address is served on at once (MAX_CONNECTIONS_PER_ADDRESS); a trusted proxy is exempt. */
  readonly perAddress: number;
  /** Connections accepted and waiting, unread, for a slot (MAX_QUEUED_CONNECTIONS). */
  readonly queued: number;
  /**
   * How long a connection waits for a slot at most before it is answered 503: HEADERS_TIMEOUT_MS +
   * KEEP_ALIVE_TIMEOUT_MS, so that an address's idle keep-alive connections are closed before its waiting ones give up.
   */
  readonly queueTimeoutMs: number;
}

/** Why a connection was answered 503 instead of being served. */
export type Refusal = 'queue full' | 'waited too long' | 'address overran';

export interface AdmissionEvents {
  /** A connection was answered 503 + Retry-After and closed, unread. */
  refused(address: string, why: Refusal): void;
  /** An idle connection was closed to make room for one waiting. */
  evicted(address: string): void;
}

/**
 * How long a served connection must have been idle (no request parsed and unanswered) before it may be closed to
 * make room: a client sends its request as it connects, and the server reads it on its next turn, so a connection
 * admitted an instant ago is idle only because it has not been read yet.
 */
export const EVICTABLE_AFTER_MS = 1000;
/** How often waiting connections look for a slot that eviction or a timeout can make. */
const SWEEP_INTERVAL_MS = 250;
/** How long a refused connection is left to read its 503 before it is destroyed (see #refuse). */
const REFUSAL_LINGER_MS = 1000;

interface Served {
  readonly address: string;
  /** Requests parsed and not yet answered; 0 while idle. */
  busy: number;
  /** When it last became idle (admitted, or its last answer ended). */
  idleSince: number;
  /** A request of it has been parsed: an idle keep-alive connection, which its client may reuse at any moment. */
  used: boolean;
}

interface Waiting {
  readonly socket: Socket;
  readonly address: string;
  readonly since: number;
  readonly serve: () => void;
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

/**
 * Which accepted connection is served now, which waits and which is told to come back later: the instance's
 * connections are shared among client addresses, HAProxy-style (a server's `maxconn` with a queue in front, rather
 * than nginx's `limit_conn`, which refuses at once, or Node's `maxConnections`, which closes the socket unanswered).
 *
 * - A connection is served at once while the instance serves fewer than `connections` and its address fewer than
 *   `perAddress` (a trusted proxy has no address share: it is many clients, and limits them itself).
 * - Otherwise it waits, accepted but unread (the listener pauses every socket it accepts), for a slot: its request
 *   stays in the kernel's buffers, costing the process a socket object. Slots go to the waiting addresses in turn.
 * - An idle served connection (nothing parsed and unanswered: connected and silent, slow headers, an idle keep-alive)
 *   idle for EVICTABLE_AFTER_MS is closed to make room for one waiting: first its own address's, then, when the
 *   instance is full, one of the address served on the most connections. Envoy's overload manager sheds the cheapest
 *   to lose first in the same way: an idle connection costs its client a reconnect at most.
 * - Past `queued` waiting, or after `queueTimeoutMs` waiting, a connection is answered 503 with Retry-After and
 *   `Connection: close`, never reset: when the queue is full, the newest waiting connection of the address with the
 *   most waiting is the one answered, so one address cannot fill the queue for everyone else.
 */
export class ConnectionAdmission {
  readonly #limits: AdmissionLimits;
  readonly #exempt: (address: string) => boolean;
  readonly #events: AdmissionEvents;
  readonly #refusal: (why: Refusal) => string | undefined;
  readonly #served = new Map<Socket, Served>();
  /** Served connections per address, for the per-address share and for choosing whom to evict. */
  readonly #servedByAddress = new Map<string, Set<Socket>>();
  /** Waiting connections per address, oldest first; the map's order is the order addresses get slots in. */
  readonly #waiting = new Map<string, Waiting[]>();
  #waitingCount = 0;
  #lingering = 0;
  #sweeper: NodeJS.Timeout | undefined;

  /**
   * `refusal` is the whole HTTP answer a refused connection gets, by why it is refused; undefined (with TLS, where
   * nothing can be said before a handshake) closes it unanswered.
   */
  constructor(limits: AdmissionLimits, exempt: (address: string) => boolean, events: AdmissionEvents, refusal: (why: Refusal) => string | undefined) {
    this.#limits = limits;
    this.#exempt = exempt;
    this.#events = events;
    this.#refusal = refusal;
  }

  /** Connections served now. */
  get served(): number {
    return this.#served.size;
  }

  /** Connections waiting for a slot now. */
  get waiting(): number {
    return this.#waitingCount;
  }

  /**
   * Puts this admission between `server`'s listener and its HTTP (or TLS) handling: every accepted socket comes
   * here paused, and reaches the server's own 'connection' listeners only once it is served. Node's maxConnections
   * is left as the hard ceiling on sockets (served, waiting and being refused together): twice `connections` +
   * `queued`, set by the caller.
   */
  install(server: Server): void {
    const listeners = server.listeners('connection') as Array<(socket: Socket) => void>;
    server.removeAllListeners('connection');
    // net.Server reads it as it accepts each socket; @types/node does not declare it on the instance.
    (server as Server & { pauseOnConnect: boolean }).pauseOnConnect = true;
    server.on('connection', (socket: Socket) =>
      this.accept(socket, () => {
        for (const listener of listeners) listener.call(server, socket);
        socket.resume();
      }),
    );
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      this.#requestStarted(request.socket);
      response.once('close', () => this.#requestEnded(request.socket));
    });
    // Closing the server (a SIGTERM's drain) leaves waiting connections waiting: each was accepted before the listener
    // closed, its request is in flight like any other, and the drain frees slots (every answer says Connection: close,
    // idle connections are closed after a grace), so each is served in turn, answered, and closed, as on a server
    // without the queue. The server's 'close' waits for them as for every accepted socket; the queue's timeout and
    // SHUTDOWN_TIMEOUT_MS still bound the wait.
  }

  /**
   * A connection from `address` was closed for overrunning its bounds (src/http/connection-bounds.ts): the address is
   * flooding, and what it has waiting is most likely more of the same, so each of those is answered 503 now, unread,
   * instead of being served the moment a slot frees (an 800-connection pipelining flood from one address otherwise
   * has every one of its connections parsed in turn). Connections it opens later wait as any other. A trusted proxy's
   * are left waiting: they are other clients'.
   */
  shedWaiting(address: string): void {
    if (this.#exempt(address)) return;
    for (const waiting of [...(this.#waiting.get(address) ?? [])]) this.#refuseWaiting(waiting, 'address overran');
  }

  /** An accepted socket: served now through `serve`, left waiting, or refused. */
  accept(socket: Socket, serve: () => void): void {
    const address = clientAddress(socket);
    socket.on('error', () => undefined);
    if (this.#hasRoom(address) || this.#makeRoom(address)) {
      this.#serve(socket, address, serve);
      return;
    }
    if (this.#waitingCount >= this.#limits.queued && !this.#refuseFromLongestQueue(address)) {
      this.#refuse(socket, address, 'queue full');
      return;
    }
    const waiting: Waiting = { socket, address, since: performance.now(), serve };
    let queue = this.#waiting.get(address);
    if (!queue) this.#waiting.set(address, (queue = []));
    queue.push(waiting);
    this.#waitingCount += 1;
    socket.once('close', () => this.#dequeue(waiting));
    this.#sweeper ??= setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS).unref();
  }

  #addressShareLeft(address: string): boolean {
    return this.#exempt(address) || (this.#servedByAddress.get(address)?.size ?? 0) < this.#limits.perAddress;
  }

  #hasRoom(address: string): boolean {
    return this.#served.size < this.#limits.connections && this.#addressShareLeft(address);
  }

  /** Closes an idle connection so that one from `address` can be served, if one has been idle long enough. */
  #makeRoom(address: string): boolean {
    const now = performance.now();
    if (!this.#addressShareLeft(address)) {
      // The address's own share is full: one of its own connections that never sent a request can make room. Not an
      // idle keep-alive one: its client may be reusing it right now (a pool that opens more connections than the
      // share, as undici's does while answers go unread), and would see it closed under its request; those are
      // closed by KEEP_ALIVE_TIMEOUT_MS, which the client was told, and the waiting one is served then.
      const victim = this.#idlest(this.#servedByAddress.get(address), now, false);
      if (!victim) return false;
      this.#evict(victim);
      return this.#hasRoom(address);
    }
    // The instance is full: an idle connection of the address served on the most, one that never sent a request if
    // it has one.
    let heaviest: Set<Socket> | undefined;
    let victim: Socket | undefined;
    for (const sockets of this.#servedByAddress.values()) {
      if (heaviest && sockets.size <= heaviest.size) continue;
      const idle = this.#idlest(sockets, now, false) ?? this.#idlest(sockets, now, true);
      if (idle) {
        heaviest = sockets;
        victim = idle;
      }
    }
    if (!victim) return false;
    this.#evict(victim);
    return this.#hasRoom(address);
  }

  /**
   * Of `sockets`, the one idle the longest, if it has been idle at least EVICTABLE_AFTER_MS: among those that never
   * sent a request, or with `used`, among idle keep-alive ones.
   */
  #idlest(sockets: Set<Socket> | undefined, now: number, used: boolean): Socket | undefined {
    let idlest: Socket | undefined;
    let since = now - EVICTABLE_AFTER_MS;
    for (const socket of sockets ?? []) {
      const served = this.#served.get(socket);
      if (served && served.busy === 0 && served.used === used && served.idleSince <= since) {
        idlest = socket;
        since = served.idleSince;
      }
    }
    return idlest;
  }

  #evict(socket: Socket): void {
    const served = this.#served.get(socket);
    if (!served) return;
    this.#forgetServed(socket, served);
    this.#events.evicted(served.address);
    socket.destroy();
  }

  #serve(socket: Socket, address: string, serve: () => void): void {
    const served: Served = { address, busy: 0, idleSince: performance.now(), used: false };
    this.#served.set(socket, served);
    let sockets = this.#servedByAddress.get(address);
    if (!sockets) this.#servedByAddress.set(address, (sockets = new Set()));
    sockets.add(socket);
    socket.once('close', () => {
      if (this.#forgetServed(socket, served)) this.#admitWaiting();
    });
    serve();
  }

  /** Whether it was still counted as served. */
  #forgetServed(socket: Socket, served: Served): boolean {
    if (!this.#served.delete(socket)) return false;
    const sockets = this.#servedByAddress.get(served.address);
    sockets?.delete(socket);
    if (sockets?.size === 0) this.#servedByAddress.delete(served.address);
    return true;
  }

  #requestStarted(socket: Socket): void {
    const served = this.#served.get(socket);
    if (!served) return;
    served.busy += 1;
    served.used = true;
  }

  #requestEnded(socket: Socket): void {
    const served = this.#served.get(socket);
    if (!served || served.busy === 0) return;
    served.busy -= 1;
    if (served.busy === 0) served.idleSince = performance.now();
  }

  /** Serves waiting connections while there is room, the waiting addresses in turn. */
  #admitWaiting(): void {
    let admitted = true;
    while (admitted && this.#waitingCount > 0 && this.#served.size < this.#limits.connections) {
      admitted = false;
      for (const [address, queue] of this.#waiting) {
        if (!this.#addressShareLeft(address)) continue;
        const waiting = queue[0] as Waiting;
        this.#dequeue(waiting);
        // The address goes to the back of the turn.
        const rest = this.#waiting.get(address);
        if (rest) {
          this.#waiting.delete(address);
          this.#waiting.set(address, rest);
        }
        this.#serve(waiting.socket, address, waiting.serve);
        admitted = true;
        break;
      }
    }
  }

  /** Removes a waiting connection from its queue (served, refused, or closed by its client). */
  #dequeue(waiting: Waiting): boolean {
    const queue = this.#waiting.get(waiting.address);
    const index = queue?.indexOf(waiting) ?? -1;
    if (!queue || index < 0) return false;
    queue.splice(index, 1);
    if (queue.length === 0) this.#waiting.delete(waiting.address);
    this.#waitingCount -= 1;
    return true;
  }

  /**
   * The queue is full and `address` wants a place: the newest waiting connection of the address with the most
   * waiting is refused instead, if that address has more waiting than `address` would with this one.
   */
  #refuseFromLongestQueue(address: string): boolean {
    const own = (this.#waiting.get(address)?.length ?? 0) + 1;
    let longest: Waiting[] | undefined;
    for (const queue of this.#waiting.values()) if (!longest || queue.length > longest.length) longest = queue;
    if (!longest || longest.length <= own) return false;
    this.#refuseWaiting(longest.at(-1) as Waiting, 'queue full');
    return true;
  }

  #refuseWaiting(waiting: Waiting, why: Refusal): void {
    if (this.#dequeue(waiting)) this.#refuse(waiting.socket, waiting.address, why);
  }

  /** Times out connections waiting too long, and makes room for the others by evicting idle connections. */
  #sweep(): void {
    const now = performance.now();
    for (const queue of this.#waiting.values()) {
      for (const waiting of [...queue]) if (now - waiting.since >= this.#limits.queueTimeoutMs) this.#refuseWaiting(waiting, 'waited too long');
    }
    this.#admitWaiting();
    for (const [address, queue] of this.#waiting) {
      const waiting = queue[0] as Waiting;
      if (!this.#makeRoom(address)) continue;
      this.#dequeue(waiting);
      this.#serve(waiting.socket, address, waiting.serve);
    }
    if (this.#waitingCount === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }

  /**
   * Answers 503 without reading the request, and half-closes. The request is then read and dropped until the client
   * closes, for at most REFUSAL_LINGER_MS: closing a socket with unread bytes in its receive buffer makes the kernel
   * send a reset, which can reach the client before the answer does. Refused connections lingering at once are
   * bounded by `connections` + `queued` (a client reads its answer and closes within milliseconds, so only a burst
   * of refusals comes near it); past it, one is closed at once (an attack, not a client to tell anything).
   */
  #refuse(socket: Socket, address: string, why: Refusal): void {
    this.#events.refused(address, why);
    const answer = this.#refusal(why);
    if (answer === undefined || this.#lingering >= this.#limits.connections + this.#limits.queued) {
      socket.destroy();
      return;
    }
    this.#lingering += 1;
    const timer = setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS).unref();
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
