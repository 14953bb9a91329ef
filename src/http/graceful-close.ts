import type { Server } from 'node:http';

/**
 * How long a shutdown leaves keep-alive connections that are idle before closing them. A client may have sent its
 * next request on one an instant before: closing it then loses that request (the client sees a reset, or a close
 * without an answer). Within this time every connection a client is using gets its next answer, with
 * `Connection: close` (Fastify adds it while closing), and ends cleanly after it; what is still idle after it is a
 * connection no one is using.
 */
const IDLE_CLOSE_GRACE_MS = 500;

/**
 * Makes closing `server` leave idle keep-alive connections alone for IDLE_CLOSE_GRACE_MS, then close those still
 * idle, again every IDLE_CLOSE_GRACE_MS until the server has closed. Node's close() calls closeIdleConnections() at
 * once (and Fastify's close again), destroying every connection between two requests, which under load is about half
 * of them, some with a request already on the way that would be lost.
 */
export function closeIdleConnectionsAfterGrace(server: Server, graceMs: number = IDLE_CLOSE_GRACE_MS): void {
  const closeIdleNow = server.closeIdleConnections.bind(server);
  let sweep: NodeJS.Timeout | undefined;
  // Nothing else here calls it: only the close of the server does.
  server.closeIdleConnections = () => {
    sweep ??= setInterval(closeIdleNow, graceMs).unref();
  };
  server.once('close', () => clearInterval(sweep));
}

/**
 * The first step of a graceful close, before the app's (Fastify's) own: the listener stops accepting now. Fastify's
 * close first marks every answer `Connection: close`, and only after its preClose hooks closes the listener; a
 * client told to reconnect in between would land in the listener's queue, which the kernel resets when the listener
 * closes. Closed first, the port refuses the reconnection instead, and the client tries elsewhere. Connections
 * already accepted are untouched: the server's 'close' still waits for every one of them (Fastify's close too).
 */
export function stopAccepting(server: Server): void {
  if (server.listening) server.close();
}
