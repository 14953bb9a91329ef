import http from 'node:http';
import https from 'node:https';

/** One Server-Sent Event as a client parses it (WHATWG HTML, "Interpreting an event stream"). */
export interface ReceivedEvent {
  readonly event: string;
  readonly id: string | undefined;
  /** The data as sent, unparsed, so an id's digits are checked as written. */
  readonly data: string;
}

/**
 * A text/event-stream client for tests: connects, parses events as they arrive, and hands them out in order. It
 * never reconnects by itself: a test reconnects with the id it last saw, as a browser would.
 */
export class EventStreamClient {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly #response: http.IncomingMessage;
  readonly #received: ReceivedEvent[] = [];
  /** Comment lines and retry fields seen. */
  readonly comments: string[] = [];
  retry: number | undefined;
  #buffer = '';
  #waiters: Array<() => void> = [];
  #ended = false;
  readonly ended: Promise<void>;

  private constructor(response: http.IncomingMessage) {
    this.#response = response;
    this.status = response.statusCode ?? 0;
    this.headers = response.headers;
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => this.#parse(chunk));
    this.ended = new Promise((resolve) => {
      const end = () => {
        this.#ended = true;
        this.#wake();
        resolve();
      };
      response.once('end', end);
      response.once('close', end);
      response.once('error', end);
    });
  }

  /** Opens a stream at `url` (from `localAddress`, if given); resolves once the answer's headers arrive (any status). */
  static open(url: string, headers: Record<string, string> = {}, localAddress?: string): Promise<EventStreamClient> {
    const get = url.startsWith('https:') ? https.get : http.get;
    return new Promise((resolve, reject) => {
      const request = get(url, { headers: { accept: 'text/event-stream', ...headers }, agent: false, ...(localAddress ? { localAddress } : {}) }, (response) => resolve(new EventStreamClient(response)));
      request.once('error', reject);
    });
  }

  #parse(chunk: string): void {
    this.#buffer += chunk;
    for (;;) {
      const end = this.#buffer.indexOf('\n\n');
      if (end === -1) break;
      const block = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 2);
      let event = 'message';
      let id: string | undefined;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) this.comments.push(line);
        else if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
        else if (line.startsWith('retry: ')) this.retry = Number(line.slice(7));
      }
      if (data.length > 0) this.#received.push({ event, id, data: data.join('\n') });
    }
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) waiter();
  }

  /** Every event received so far. */
  get events(): readonly ReceivedEvent[] {
    return this.#received;
  }

  /** Waits until `count` events have arrived in all, and answers them; rejects if the stream ends first. */
  async waitForEvents(count: number): Promise<ReceivedEvent[]> {
    while (this.#received.length < count) {
      if (this.#ended) throw new Error(`the stream ended after ${this.#received.length} events, ${count} awaited`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    return this.#received.slice(0, count);
  }

  /** Waits until a comment line has arrived. */
  async waitForComment(): Promise<void> {
    while (this.comments.length === 0) {
      if (this.#ended) throw new Error('the stream ended before any comment line');
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  get isEnded(): boolean {
    return this.#ended;
  }

  /** Stops reading: the socket's buffers fill and the server sees a client that does not read. */
  pause(): void {
    this.#response.pause();
  }

  /** Reads again after pause(). */
  resume(): void {
    this.#response.resume();
  }

  close(): void {
    this.#response.destroy();
  }

  /** The body of a non-200 answer. */
  async body(): Promise<string> {
    await this.ended;
    return this.#buffer;
  }
}
