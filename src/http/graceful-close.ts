import type { Server } from 'node:http';

/**
 * How long a shutdown leaves keep-alive connections that are idle before closing them. A client may have sent its
 * next request on one an instant before: closing it then loses that request (the client sees a reset, or a close
 * without an answer). Within this time every connection a client is using gets its next answer, with
 * `Connection: close` (Fastify adds it while closing), and ends cleanly after it; what is still idle after it is a
 * connection no one is using.
 */
export const IDLE_CLOSE_GRACE_MS = 500;

/**
 * Makes `server.close()` gentle on connections, in two ways.
 *
 * - It stops accepting only after the event loop has polled once more, so that connections the kernel completed
 *   and queued for this listener (which it resets when the listener closes) are accepted and served first. Under
 *   load the loop may not have polled for a while, and with WORKERS > 1 each worker's listener has a queue of its own.
 * - It leaves idle keep-alive connections alone for IDLE_CLOSE_GRACE_MS, then closes those still idle, again every
 *   IDLE_CLOSE_GRACE_MS until the server has closed. Node's close() calls closeIdleConnections() at once (and
 *   Fastify's close again), destroying every connection between two requests, which under load is about half of
 *   them, some with a request already on the way (issue 30: 6 to 29 connections lost per SIGTERM under 32
 *   connections of load).
 */
export function closeGently(server: Server, graceMs: number = IDLE_CLOSE_GRACE_MS): void {
  const closeIdleNow = server.closeIdleConnections.bind(server);
  let sweep: NodeJS.Timeout | undefined;
  // Nothing else here calls it: only the close of the server does.
  server.closeIdleConnections = () => {
    sweep ??= setInterval(closeIdleNow, graceMs).unref();
  };
  server.once('close', () => clearInterval(sweep));
  const closeNow = server.close.bind(server);
  // Two turns: the first may fall in the poll phase that is running now; the second comes after a poll of its own.
  server.close = ((callback?: (error?: Error) => void) => {
    setImmediate(() => setImmediate(() => closeNow(callback)));
    return server;
  }) as Server['close'];
}
