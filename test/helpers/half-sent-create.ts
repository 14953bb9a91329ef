import { connect, type Socket } from 'node:net';
import { waitFor } from './wait.js';

/**
 * POST /plants of `body` on a raw socket of its own, whose headers the server has read (100 Continue came) and half of
 * whose body is still to come: certainly in flight, for tests of what a signal or a crash does to a request.
 * `finish` sends the rest and resolves with the final answer once the server closes the connection.
 */
export async function halfSentCreate(port: number, token: string, body: string): Promise<{ finish(): Promise<{ status: number; body: string }> }> {
  const payload = Buffer.from(body);
  const half = Math.floor(payload.length / 2);
  const socket: Socket = connect(port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('error', () => undefined);
  socket.write(
    `POST /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${payload.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
  );
  socket.write(payload.subarray(0, half));
  await waitFor('the server to start reading the request', () => received.includes('100 Continue'), { timeoutMs: 30_000 });
  return {
    async finish() {
      // write, not end: a client's FIN makes Node's HTTP server abort the request it is reading (no half-open).
      socket.write(payload.subarray(half));
      await closed;
      const final = received.slice(received.lastIndexOf('HTTP/1.1 '));
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(final)?.[1]);
      return { status, body: final.slice(final.indexOf('\r\n\r\n') + 4) };
    },
  };
}
