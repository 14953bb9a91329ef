import { createServer, type IncomingMessage, type Server, ServerResponse, type ServerOptions } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import { trustedProxies } from './client-address.js';
import { ConnectionAdmission } from './connection-admission.js';
import { CONNECTION_LIMITS, IN_FLIGHT_SHARE_OF_PENDING, PIPELINING_CONNECTIONS } from './connection-bounds.js';
import type { Refusal } from './connection-refusal.js';
import { refusalAnswer } from './error-reply.js';
import { ApiError, BadRequestError, ExpectationFailedError, NotImplementedError } from './errors.js';
import { closeIdleConnectionsAfterGrace } from './graceful-close.js';
import { PARSING_STOPPABLE, StoppingIncomingMessage, stopsParsing } from './node-internals.js';
import { secureContextOptions, type ServedPair } from './tls.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** Marks a request whose Expect header is not 100-continue; Node hands it over through 'checkExpectation'. */
const UNMET_EXPECTATION = Symbol('unmetExpectation');

/**
 * The HTTP/1.1 server the app runs on (Fastify's serverFactory), built so that every request reaches the app and
 * gets an Error record where Node would answer on its own with an empty body or no answer at all:
 * - an HTTP/1.1 request without Host (Node: a bare 400): `requireHostHeader` is off and framingProblem answers it;
 * - an Expect other than 100-continue (Node: a bare 417): the 'checkExpectation' listener hands it over, marked;
 * - CONNECT (Node: the socket closed unanswered): the 'connect' listener gives it a response and hands it over, and
 *   the router answers 405 or 404 like any method a path does not take.
 * Every connection and request goes through ConnectionAdmission, which serves connections at once while the instance
 * has room (MAX_CONNECTIONS), shares the slots among addresses when it is full (the rest wait unread), and bounds
 * what one connection, and all of them together, can make the server hold (MAX_PENDING_REQUESTS). Node's
 * maxConnections is the hard ceiling on sockets behind it.
 * With `tls`, the same server speaks HTTPS only (node:https's is node:http's behind a TLS listener); a handshake not
 * done within TLS_HANDSHAKE_TIMEOUT_MS is cut off, and a connection in its handshake counts towards MAX_CONNECTIONS
 * (Node counts connections as it accepts them).
 *
 * `threads` is the number of servers of the instance (WORKERS), each on its own thread with a server of its own:
 * each takes an equal share of the two instance-wide limits. The kernel spreads connections over the threads
 * (SO_REUSEPORT), so a share is what the thread gets of a flood too; counting across threads instead would put an
 * atomic operation on every request and leave the count of a worker that dies wrong.
 */
export function httpServer(
  handler: Handler,
  http: Config['http'],
  log: FastifyBaseLogger,
  tls?: ServedPair,
  threads = 1,
  trustProxy: readonly string[] = [],
): Server {
  const pending = shareOf(http.maxPendingRequests, threads);
  const limits = {
    connections: shareOf(http.maxConnections, threads),
    queued: shareOf(http.maxQueuedConnections, threads),
    queueTimeoutMs: http.headersTimeoutMs + http.keepAliveTimeoutMs,
    pending,
    inFlight: Math.max(1, Math.floor(pending * IN_FLIGHT_SHARE_OF_PENDING)),
    pipelining: shareOf(PIPELINING_CONNECTIONS, threads),
  };
  const refused = countedLog((count, by) => log.warn({ refused: count, by }, `answered ${count} connection(s) 503 unread: the instance had no connection slot free`));
  const evicted = countedLog((count, by) => log.warn({ evicted: count, by }, `closed ${count} idle connection(s) to serve others waiting`));
  const admission = new ConnectionAdmission(
    limits,
    CONNECTION_LIMITS,
    handler,
    trustedProxies(trustProxy),
    {
      refused: (address: string, why: Refusal) => refused(`${address}: ${why}`),
      evicted: (address: string) => evicted(address),
      overran: (socket, why) => log.warn({ remoteAddress: socket.remoteAddress, remotePort: socket.remotePort, why }, `closed a connection: ${why}`),
    },
    // Nothing can be answered on a TLS connection before its handshake: a refused one is closed.
    (why) => (tls ? undefined : refusalAnswer(why)),
  );
  const options = {
    headersTimeout: http.headersTimeoutMs,
    maxHeaderSize: http.maxHeaderBytes,
    // Node checks the header and request timeouts only this often (default 30 s): a slow-loris client would
    // hold its connection up to 30 s past HEADERS_TIMEOUT_MS without it.
    connectionsCheckingInterval: Math.min(1000, http.headersTimeoutMs, http.requestTimeoutMs),
    requireHostHeader: false,
    ...(PARSING_STOPPABLE ? { IncomingMessage: StoppingIncomingMessage, shouldUpgradeCallback: stopsParsing } : {}),
  } as ServerOptions & { shouldUpgradeCallback: (request: IncomingMessage) => boolean };
  // Typed as node:http's: to everything here and in the app an https.Server is one (its requests and replies are node:http's).
  const server = tls
    ? (createHttpsServer({ ...options, handshakeTimeout: http.tlsHandshakeTimeoutMs, ...secureContextOptions(tls) }, admission.handle) as unknown as Server)
    : createServer(options, admission.handle);
  admission.install(server);
  // The hard ceiling on sockets (file descriptors): those served and waiting, and as many again being refused.
  server.maxConnections = 2 * (limits.connections + limits.queued);
  logDroppedConnections(server, log);
  server.requestTimeout = http.requestTimeoutMs;
  server.keepAliveTimeout = http.keepAliveTimeoutMs;
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    (request as IncomingMessage & { [UNMET_EXPECTATION]?: true })[UNMET_EXPECTATION] = true;
    admission.handle(request, response);
  });
  server.on('connect', (request: IncomingMessage, socket: Socket) => {
    // Node has let go of the connection: no request follows, so the answer is the last thing on it.
    const response = new ServerResponse(request);
    response.shouldKeepAlive = false;
    response.assignSocket(socket);
    response.once('finish', () => socket.end());
    socket.once('error', () => socket.destroy());
    handler(request, response);
  });
  closeIdleConnectionsAfterGrace(server);
  return server;
}

/**
 * The kernel's queue of connections not yet accepted, per listening socket: as deep as what the admission serves and
 * queues behind it (the kernel caps it at net.core.somaxconn). At Node's default of 511, a client opening 1,000
 * connections at once overflows it, and each handshake the kernel drops costs the client a retransmission a second
 * or more later.
 */
export function listenBacklog(http: Config['http'], threads: number): number {
  return shareOf(http.maxConnections + http.maxQueuedConnections, threads);
}

/** One thread's share of an instance-wide limit: at least 1, and together at least the limit. */
export function shareOf(limit: number, threads: number): number {
  return Math.max(1, Math.ceil(limit / Math.max(1, threads)));
}

/** Connections closed or refused by the bounds are logged at most this often, counted: a flood is one line, not thousands. */
const DROP_LOG_INTERVAL_MS = 10_000;

/**
 * A logger of events counted by key (the client address and why): the first of a burst is logged at once, the rest
 * together once DROP_LOG_INTERVAL_MS has passed, with the counts by key (the ten largest).
 */
function countedLog(write: (count: number, by: Record<string, number>) => void): (key: string) => void {
  let counts = new Map<string, number>();
  let total = 0;
  let timer: NodeJS.Timeout | undefined;
  const report = () => {
    timer = undefined;
    if (total === 0) return;
    const by = Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]).slice(0, 10));
    write(total, by);
    counts = new Map();
    total = 0;
  };
  return (key) => {
    total += 1;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    if (timer === undefined) {
      if (total === 1) report();
      timer = setTimeout(report, DROP_LOG_INTERVAL_MS).unref();
    }
  };
}

function logDroppedConnections(server: Server, log: FastifyBaseLogger): void {
  let dropped = 0;
  let timer: NodeJS.Timeout | undefined;
  const report = () => {
    timer = undefined;
    if (dropped === 0) return;
    log.warn({ dropped, maxConnections: server.maxConnections }, `closed ${dropped} connection(s) as they were accepted: MAX_CONNECTIONS connections were served and MAX_QUEUED_CONNECTIONS waiting and being refused`);
    dropped = 0;
  };
  server.on('drop', () => {
    dropped += 1;
    if (timer === undefined) {
      // The first of a burst is reported at once, the rest together once the interval has passed.
      if (dropped === 1) report();
      timer = setTimeout(report, DROP_LOG_INTERVAL_MS).unref();
    }
  });
  server.on('close', () => clearTimeout(timer));
}

/** Transfer codings RFC 9112 §7 defines; this server implements chunked only. */
const CHUNKED = 'chunked';

/**
 * Why Node would have refused this request's framing itself, or undefined: an HTTP/1.1 request without Host
 * (RFC 9112 §3.2: 400), an Expect that cannot be met (417), a transfer coding other than chunked (RFC 9112 §6.1:
 * 501; Node decodes only chunked, so `gzip, chunked` would be read as if it were plain, and `gzip` alone is already
 * refused by Node's parser as malformed). The connection is closed after these answers: the body, if any, is unread.
 */
export function framingProblem(request: IncomingMessage): ApiError | undefined {
  if (request.httpVersion === '1.1' && request.headers.host === undefined) {
    return new BadRequestError('the request has no Host header; HTTP/1.1 requires one');
  }
  if ((request as IncomingMessage & { [UNMET_EXPECTATION]?: true })[UNMET_EXPECTATION]) {
    return new ExpectationFailedError(request.headers.expect ?? '');
  }
  const codings = request.headers['transfer-encoding'];
  if (codings !== undefined) {
    for (const coding of codings.split(',')) {
      const name = coding.trim().toLowerCase();
      if (name !== '' && name !== CHUNKED) return new NotImplementedError(`Transfer-Encoding ${JSON.stringify(name)} is not supported; only chunked`);
    }
  }
  return undefined;
}
