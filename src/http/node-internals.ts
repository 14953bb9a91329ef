import { IncomingMessage, Server } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

/**
 * Every use the connection layer makes of Node behaviour that Node does not document, kept here so that
 * test/unit/node-internals.test.ts fails on the Node release that changes one of them, naming it.
 */

/**
 * Puts `accept` between `server`'s listener and the handling its own 'connection' listeners do (HTTP parsing, or a
 * TLS handshake): every accepted socket reaches `accept` paused (socket.pause(), before the event loop has read any
 * of it: what the client sent stays in the kernel), and `serve` hands it on when a slot is free. Undocumented: that
 * http.Server's (and tls.Server's) handling is its 'connection' listeners, which can be taken off and called later.
 */
export function interposeConnections(server: NetServer, accept: (socket: Socket, serve: () => void) => void): void {
  const listeners = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    socket.pause();
    accept(socket, () => {
      for (const listener of listeners) listener.call(server, socket);
      socket.resume();
    });
  });
}

/** The TCP socket a server-side TLS socket runs on (the one the 'connection' event gave): Node keeps it as `_parent`. */
export function tcpSocketOf(socket: TLSSocket): Socket | undefined {
  return (socket as TLSSocket & { _parent?: Socket | null })._parent ?? undefined;
}

/** Where a request's `upgrade` flag, as the parser found it, is kept (see StoppingIncomingMessage). */
const PARSED_UPGRADE = Symbol('parsedUpgrade');
/** Set on a request whose headers were parsed after its socket had been destroyed. */
const AFTER_CLOSE = Symbol('afterClose');

/**
 * Node's request object, except that a request parsed on a socket already destroyed claims to be an upgrade. Node
 * parses a whole socket read (up to 64 KiB, some 1,600 minimal requests) in one go and makes a request and a response
 * object for each; a 'request' listener cannot stop that, and destroying the socket does not either. An upgrade does:
 * when shouldUpgradeCallback accepts one, the parser stops right after its headers, the rest of the read is never
 * parsed, and with no 'upgrade' listener Node destroys the socket. So once a connection has been closed for its
 * bounds, the next request parsed on it ends the parsing of that read, instead of a thousand more objects that die
 * unanswered. Node then skips its own clean-up of the connection's unanswered requests, which the caller does instead.
 * Undocumented: that the parser sets `upgrade` through the IncomingMessage option's class and reads it back.
 */
export class StoppingIncomingMessage extends IncomingMessage {
  declare [PARSED_UPGRADE]: boolean | null;
  readonly [AFTER_CLOSE]: boolean;

  constructor(socket: Socket) {
    super(socket);
    this[AFTER_CLOSE] = socket.destroyed;
  }
}
Object.defineProperty(StoppingIncomingMessage.prototype, 'upgrade', {
  get(this: StoppingIncomingMessage): boolean {
    return this[AFTER_CLOSE] || (this[PARSED_UPGRADE] ?? false);
  },
  set(this: StoppingIncomingMessage, value: boolean | null) {
    this[PARSED_UPGRADE] = value;
  },
});

/** Accepts, as an upgrade, only a request parsed after its socket was destroyed: no real upgrade is served. */
export function stopsParsing(request: IncomingMessage): boolean {
  return request instanceof StoppingIncomingMessage && request[AFTER_CLOSE];
}

/**
 * Node 24.9 and later ask shouldUpgradeCallback; older ones accept an upgrade only when there is an 'upgrade' listener
 * (there is none), and would treat such a request as an upgrade only after parsing the whole read: no gain, and
 * Node's own clean-up of the connection's requests skipped. There, the plain request object is used.
 */
export const PARSING_STOPPABLE = typeof (new Server() as Server & { shouldUpgradeCallback?: unknown }).shouldUpgradeCallback === 'function';

/**
 * Destroys `socket`, its unanswered requests aborted without stack traces. When a socket closes, Node aborts every
 * request it parsed and did not answer, each with an Error of its own, and capturing those stack traces cost more
 * CPU and memory than everything else a pipelining flood made the server do (over a thousand requests from one
 * 64 KiB read). Nobody reads them: the client is gone and the requests were never handed to a handler. Undocumented:
 * that those errors are made synchronously inside the socket's 'close' listeners.
 */
export function destroyWithoutStackTraces(socket: Socket): void {
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
