import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';

/** One request a receiver got: its headers (lower-case names) and body as sent, byte for byte. */
export interface Received {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** performance.now() when it arrived. */
  readonly at: number;
}

/**
 * How to answer the request numbered `index` (0-based, over this receiver's life): a status with headers, or 'hang'
 * (never answer; the connection stays open until the receiver closes).
 */
export type Responder = (request: Received, index: number) => { status: number; headers?: Record<string, string>; body?: string; delayMs?: number } | 'hang';

/**
 * A real webhook receiver: a node:http server on 127.0.0.1 that records every request and answers as `respond`
 * says (200 by default). Waiting is by event (`waitFor`), never by polling; close() ends every connection.
 */
export class Receiver {
  readonly received: Received[] = [];
  readonly #events = new EventEmitter();
  readonly #server: Server;
  readonly #hanging = new Set<ServerResponse>();
  respond: Responder;

  private constructor(server: Server, respond: Responder) {
    this.#server = server;
    this.respond = respond;
  }

  static async start(respond: Responder = () => ({ status: 200 })): Promise<Receiver> {
    // The handler needs the receiver, which needs the server: the handler reads it once it exists.
    const made: { receiver?: Receiver } = {};
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const self = made.receiver as Receiver;
        const received: Received = { method: request.method ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: performance.now() };
        const index = self.received.length;
        self.received.push(received);
        const answer = self.respond(received, index);
        self.#events.emit('request', received);
        if (answer === 'hang') {
          self.#hanging.add(response);
          return;
        }
        const send = () => {
          response.writeHead(answer.status, answer.headers ?? {});
          response.end(answer.body ?? '');
        };
        if (answer.delayMs) setTimeout(send, answer.delayMs);
        else send();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    made.receiver = new Receiver(server, respond);
    return made.receiver;
  }

  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Resolves once `check` holds over what was received, re-checked at every request; fails after `timeoutMs`. */
  async waitFor(check: (received: readonly Received[]) => boolean, timeoutMs = 20_000, what = 'requests'): Promise<void> {
    if (check(this.received)) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#events.off('request', listener);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; received ${this.received.length}`));
      }, timeoutMs);
      const listener = () => {
        if (!check(this.received)) return;
        clearTimeout(timer);
        this.#events.off('request', listener);
        resolve();
      };
      this.#events.on('request', listener);
    });
  }

  /** Waits for at least `count` requests. */
  waitForCount(count: number, timeoutMs?: number): Promise<void> {
    return this.waitFor((received) => received.length >= count, timeoutMs, `${count} requests`);
  }

  async close(): Promise<void> {
    for (const response of this.#hanging) response.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
