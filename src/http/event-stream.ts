import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ChangeFeed, FeedBatch, FeedObserver, FeedSubscriber, StreamEnd } from '../feed/change-feed.js';
import { changeEvent, resetEvent } from '../feed/events.js';
import type { PlantChange } from '../storage/change-store.js';
import { stopCountingAsPending } from './connection-bounds.js';
import { BadRequestError } from './errors.js';

/**
 * `GET /plants/events`: Server-Sent Events (the WHATWG HTML standard's text/event-stream), one per change of the
 * change log, each with its sequence as its `id:`, so a client resumes exactly where it stopped (Last-Event-ID or
 * `?after=`). A stream first pages through the backlog after its cursor, in batches, waiting for the socket to drain
 * between them; then it joins the event loop's ChangeFeed (src/feed/change-feed.ts) and is handed each new change as
 * the feed reads it. A live stream that does not read is closed once what the server buffers for it passes a bound:
 * the client resumes later from its cursor, and the server never holds more than the bound for it.
 */

export const EVENT_STREAM = 'text/event-stream';

const CURSOR = /^(0|[1-9][0-9]{0,18})$/;

/** A cursor (Last-Event-ID or `after`): a non-negative decimal integer within int64, or a 400 naming where it came from. */
export function parseCursor(text: string, where: string): bigint {
  if (CURSOR.test(text)) {
    const value = BigInt(text);
    if (value <= 9223372036854775807n) return value;
  }
  throw new BadRequestError(`${where} must be a non-negative integer (an event id of this stream) in canonical decimal`);
}

/**
 * Whether an Accept header lets the answer be text/event-stream: absent, or naming it, text/* or *\/* with a
 * non-zero q. Parameters other than q are ignored.
 */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((range) => {
    const [type = '', ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    if (type !== EVENT_STREAM && type !== 'text/*' && type !== '*/*') return false;
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/** Where a stream starts: after `cursor`; with `reset`, its first event is a reset to that cursor (the newest change). */
export interface StartingPoint {
  readonly cursor: bigint;
  readonly reset: boolean;
}

export interface EventStreamSettings {
  /** A live stream whose unsent bytes pass this is closed (FEED_STREAM_BUFFER_BYTES). */
  readonly bufferBytes: number;
  /** A comment line this often keeps proxies from closing an idle stream (FEED_HEARTBEAT_MS); also the `retry:` advised. */
  readonly heartbeatMs: number;
  readonly observer: FeedObserver | undefined;
  /** A stream cut short by a failure after its answer began (storage unavailable while paging): logged, the connection closed. */
  readonly onError: (error: unknown) => void;
}

/** The `retry:` advised: how long a client waits before reconnecting. */
const RETRY_MS = 2000;

/**
 * One open stream. Once the answer's head is out, events are written to the connection's socket itself, not through
 * the ServerResponse: the body needs no framing (Connection: close, no chunked encoding), and the response corks the
 * socket on each write and uncorks it on the next tick, which would put each stream's write (its syscall) outside the
 * fan-out loop that the feed times (src/feed/change-feed.ts, `loopShare`). The socket keeps the order of the writes.
 */
class EventStream implements FeedSubscriber {
  readonly #response: ServerResponse;
  readonly #socket: Socket;
  readonly #streams: EventStreams;
  #cursor = 0n;
  #live = false;
  #ended: StreamEnd | undefined;
  #unsubscribe: (() => void) | undefined;
  readonly done: Promise<void>;
  #finish!: () => void;

  constructor(response: ServerResponse, socket: Socket, streams: EventStreams) {
    this.#response = response;
    this.#socket = socket;
    this.#streams = streams;
    this.done = new Promise((resolve) => {
      this.#finish = resolve;
    });
    response.once('close', () => this.end('client'));
  }

  get ended(): boolean {
    return this.#ended !== undefined;
  }

  /** Writes the reset the start calls for, if any, then the backlog after the cursor, then joins the feed. */
  async run(start: StartingPoint): Promise<void> {
    const { feed } = this.#streams;
    const log = feed.log;
    this.#cursor = start.cursor;
    if (start.reset) this.#reset(start.cursor);
    while (!this.ended) {
      const page = await log.changesAfter(this.#cursor, feed.batchSize);
      if (this.ended) return;
      const first = page[0];
      // Sequences have no gaps (both databases number changes one by one, in their transaction): a gap means the
      // changes after the cursor were pruned since it was checked.
      if (first && first.sequence !== this.#cursor + 1n) {
        this.#reset(await log.newestSequence());
        continue;
      }
      if (page.length > 0) {
        const text = page.map((change) => changeEvent(change)).join('');
        this.#cursor = (page.at(-1) as PlantChange).sequence;
        this.#streams.observer?.eventsSent(page.length);
        if (!this.#socket.write(text)) await this.#drained();
        if (this.ended) return;
      }
      // No await between this check and subscribing: every change after the feed's position reaches this stream.
      if (page.length < feed.batchSize && this.#cursor >= feed.position) {
        this.#live = true;
        this.#unsubscribe = feed.subscribe(this);
        return;
      }
    }
  }

  #reset(newest: bigint): void {
    this.#socket.write(resetEvent(newest));
    this.#cursor = newest;
    this.#streams.observer?.resetSent();
  }

  #drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.#socket.off('drain', done);
        this.#socket.off('close', done);
        resolve();
      };
      this.#socket.on('drain', done);
      this.#socket.on('close', done);
    });
  }

  deliver(batch: FeedBatch): void {
    if (this.ended || this.#overBound()) return;
    const events = batch.after(this.#cursor);
    if (events === undefined) return;
    this.#cursor = batch.last;
    this.#socket.write(events.bytes);
    this.#streams.observer?.eventsSent(events.count);
  }

  heartbeat(): void {
    if (!this.#live || this.ended || this.#overBound()) return;
    this.#socket.write(': keep-alive\n\n');
  }

  /**
   * A client that does not read is closed once the bytes still waiting from earlier writes pass the bound; it resumes
   * from its cursor. Checked before each write, not after: a write's own bytes count as waiting until the socket has
   * taken them, a moment later, whether the client reads or not.
   */
  #overBound(): boolean {
    if (this.#socket.writableLength <= this.#streams.settings.bufferBytes) return false;
    this.end('slow');
    this.#socket.destroy();
    return true;
  }

  end(why: StreamEnd): void {
    if (this.#ended) return;
    this.#ended = why;
    this.#unsubscribe?.();
    this.#streams.forget(this, why);
    if (why === 'shutdown') this.#response.end();
    this.#finish();
  }
}

/** The head of every stream's answer: 200 text/event-stream, to be read until the connection closes. */
function writeStreamHead(response: ServerResponse, headers: Record<string, string | number | string[]>): void {
  // The body ends with the connection (Connection: close), so it needs no chunked framing: each write is the
  // event bytes alone.
  response.useChunkedEncodingByDefault = false;
  response.writeHead(200, {
    ...headers,
    'content-type': `${EVENT_STREAM}; charset=utf-8`,
    'cache-control': 'no-store',
    // nginx buffers a proxied answer unless told not to: a stream's events would wait in it.
    'x-accel-buffering': 'no',
    // A stream ends only when the server lets go (shutdown, a slow reader): a reconnection must be a new connection,
    // to this server once it is back or to another, never one left to a server that is closing.
    connection: 'close',
  });
}

/**
 * The streams of one app: each opened by the route, all kept alive by one heartbeat timer (not one per stream), all
 * ended by closeAll() when the server shuts down (the clients resume elsewhere).
 */
export class EventStreams {
  readonly feed: ChangeFeed;
  readonly settings: EventStreamSettings;
  readonly #open = new Set<EventStream>();
  #heartbeat: NodeJS.Timeout | undefined;
  #closing = false;

  constructor(feed: ChangeFeed, settings: EventStreamSettings) {
    this.feed = feed;
    this.settings = settings;
  }

  get observer(): FeedObserver | undefined {
    return this.settings.observer;
  }

  get size(): number {
    return this.#open.size;
  }

  /**
   * Where a stream asking for the changes after `requested` starts (the newest change when undefined). Read before
   * the answer begins, so that storage being unavailable is still an Error record (503).
   */
  async startingPoint(requested: bigint | undefined): Promise<StartingPoint> {
    await this.feed.start();
    const newest = await this.feed.log.newestSequence();
    if (requested === undefined) return { cursor: newest, reset: false };
    const oldest = await this.feed.log.oldestRetained();
    // A cursor past the newest change is one this store never wrote (another database, or one restored from a backup).
    if (requested > newest || (oldest !== undefined && requested < oldest - 1n)) return { cursor: newest, reset: true };
    return { cursor: requested, reset: false };
  }

  /** Whether the server is shutting down: a stream asked for now ends at once (endAtOnce). */
  get closing(): boolean {
    return this.#closing;
  }

  /**
   * Answers 200 text/event-stream on `response` (with `headers`) and streams from `start` until the client leaves,
   * it is closed for not reading, or the server shuts down; resolves then.
   */
  async serve(response: ServerResponse, headers: Record<string, string | number | string[]>, start: StartingPoint): Promise<void> {
    const { socket } = response;
    // The client left while the starting point was read: its 'close' has been and gone, and nobody waits for a stream.
    if (socket === null || socket.destroyed) return;
    const stream = new EventStream(response, socket, this);
    this.#open.add(stream);
    this.observer?.streamOpened();
    this.#heartbeat ??= setInterval(() => {
      for (const open of this.#open) open.heartbeat();
    }, this.settings.heartbeatMs).unref();
    writeStreamHead(response, headers);
    response.write(`retry: ${RETRY_MS}\n\n`);
    // A stream is bounded as a connection (MAX_CONNECTIONS, the stream limits), not as a request waiting for its answer.
    stopCountingAsPending(response);
    try {
      await stream.run(start);
    } catch (error) {
      stream.end('error');
      response.destroy();
      this.settings.onError(error);
    }
    await stream.done;
  }

  forget(stream: EventStream, why: StreamEnd): void {
    if (!this.#open.delete(stream)) return;
    this.observer?.streamClosed(why);
    if (this.#open.size === 0) {
      clearInterval(this.#heartbeat);
      this.#heartbeat = undefined;
    }
  }

  /**
   * The answer to a stream asked for while the server shuts down (on a connection it accepted before it stopped
   * accepting): a stream that ends at once, its `retry:` alone. A browser's EventSource that gets any answer but a
   * 200 text/event-stream stops for good; after a stream that ends it reconnects, to this server once it is back or
   * to another, as every stream ended by closeAll() does.
   */
  endAtOnce(response: ServerResponse, headers: Record<string, string | number | string[]>): void {
    writeStreamHead(response, headers);
    response.end(`retry: ${RETRY_MS}\n\n`);
  }

  /** Ends every stream cleanly; any asked for from now on ends at once (endAtOnce). */
  closeAll(): void {
    this.#closing = true;
    for (const stream of [...this.#open]) stream.end('shutdown');
  }
}
