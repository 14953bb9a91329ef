import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { MissingScopeError } from '../auth/errors.js';
import type { TokenWatch } from '../auth/authenticator.js';
import type { ChangeFeed, FeedBatch, FeedObserver, FeedSubscriber, StreamEnd } from '../feed/change-feed.js';
import { changeEvent, refusedEvent, resetEvent } from '../feed/events.js';
import { startingPoint, type StartingPoint } from '../feed/starting-point.js';
import type { PlantChange } from '../storage/change-store.js';
import { stopCountingAsPending } from './connection-bounds.js';
import { BadRequestError } from './errors.js';
import { StreamTurns, type Turn } from './stream-turns.js';

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

/** Watches the stream's token for as long as the stream lasts (TokenAuthenticator.watch), calling back once it is refused. */
export type WatchToken = (onRefused: (error: Error) => void) => TokenWatch;

/** The answer's head, for GET and HEAD alike. */
const STREAM_HEADERS = {
  'content-type': `${EVENT_STREAM}; charset=utf-8`,
  'cache-control': 'no-store',
  // nginx buffers a proxied answer unless told not to: a stream's events would wait in it.
  'x-accel-buffering': 'no',
  // A stream ends only when the server lets go (shutdown, a slow reader, a refused token): a reconnection must be a new
  // connection, to this server once it is back or to another, never one left to a server that is closing.
  connection: 'close',
} as const;

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
  /** The stream asked for everything kept (`?after=0`) and has sent nothing yet: a prune meanwhile moves its start on. */
  #fromOldestKept = false;
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
  async run(start: StartingPoint & { readonly fromOldestKept: boolean }): Promise<void> {
    const { feed } = this.#streams;
    const log = feed.log;
    this.#cursor = start.cursor;
    this.#fromOldestKept = start.fromOldestKept;
    if (start.reset) this.#reset(start.cursor);
    while (!this.ended) {
      const page = await log.changesAfter(this.#cursor, feed.batchSize);
      if (this.ended) return;
      const first = page[0];
      // Sequences have no gaps (both databases number changes one by one, in their transaction): a gap means the
      // changes after the cursor were pruned since it was checked.
      if (first ? first.sequence !== this.#cursor + 1n : this.#cursor < feed.position) {
        if (first && this.#fromOldestKept) this.#cursor = first.sequence - 1n;
        else this.#reset(await log.newestSequence());
        continue;
      }
      if (page.length > 0) {
        await this.#replay(page);
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

  /**
   * Writes a page of the backlog in pieces that keep what waits for the client within the stream's bound (an event
   * larger than the bound goes alone), each after the client has read the one before: a slow reader that reads is
   * never cut off for a page it could not take in one go.
   */
  async #replay(page: readonly PlantChange[]): Promise<void> {
    const { bufferBytes } = this.#streams.settings;
    let piece = '';
    let pieceBytes = 0;
    let count = 0;
    let last = this.#cursor;
    const send = async () => {
      this.#cursor = last;
      this.#fromOldestKept = false;
      this.#streams.observer?.eventsSent(count);
      const more = this.#socket.write(piece);
      piece = '';
      pieceBytes = 0;
      count = 0;
      if (!more) await this.#drained();
    };
    for (const change of page) {
      const event = changeEvent(change);
      const bytes = Buffer.byteLength(event);
      if (count > 0 && this.#socket.writableLength + pieceBytes + bytes > bufferBytes) {
        await send();
        if (this.ended) return;
      }
      piece += event;
      pieceBytes += bytes;
      count += 1;
      last = change.sequence;
    }
    if (count > 0) await send();
  }

  #reset(newest: bigint): void {
    this.#socket.write(resetEvent(newest));
    this.#cursor = newest;
    this.#fromOldestKept = false;
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

  /**
   * The stream's token is refused from now on (revoked, expired, without the scope): a last event says why, as the
   * Error record a new request would get, and the stream ends with nothing after it. A client that reconnects gets
   * that refusal as its answer (an EventSource stops there).
   */
  refuse(error: Error): void {
    if (this.ended) return;
    const status = error instanceof MissingScopeError ? 403 : 401;
    this.#socket.write(refusedEvent(this.#cursor, { error: status, message: error.message }));
    this.end('refused');
  }

  end(why: StreamEnd): void {
    if (this.#ended) return;
    this.#ended = why;
    this.#unsubscribe?.();
    this.#streams.forget(this, why);
    if (why === 'shutdown' || why === 'refused') this.#response.end();
    this.#finish();
  }
}

/** The head of every stream's answer: 200 text/event-stream, to be read until the connection closes. */
function writeStreamHead(response: ServerResponse, headers: Record<string, string | number | string[]>): void {
  // The body ends with the connection (Connection: close), so it needs no chunked framing: each write is the
  // event bytes alone.
  response.useChunkedEncodingByDefault = false;
  response.writeHead(200, { ...headers, ...STREAM_HEADERS });
}

/**
 * The streams of one app: each opened by the route, all kept alive by one heartbeat timer (not one per stream), all
 * ended by closeAll() when the server shuts down (the clients resume elsewhere).
 */
export class EventStreams {
  readonly feed: ChangeFeed;
  readonly settings: EventStreamSettings;
  readonly #open = new Set<EventStream>();
  readonly #turns = new StreamTurns();
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
   * Where a stream asking for the changes after `requested` starts (the newest change when undefined): the rule of
   * src/feed/starting-point.ts. Read before the answer begins, so that storage being unavailable is still an Error
   * record (503).
   */
  async startingPoint(requested: bigint | undefined): Promise<StartingPoint & { readonly fromOldestKept: boolean }> {
    await this.feed.start();
    const newest = await this.feed.log.newestSequence();
    const oldest = requested === undefined ? undefined : await this.feed.log.oldestRetained();
    return { ...startingPoint(requested, newest, oldest), fromOldestKept: requested === 0n };
  }

  /** Whether the server is shutting down: a stream asked for now ends at once (endAtOnce). */
  get closing(): boolean {
    return this.#closing;
  }

  /** When a stream request may be answered (StreamTurns.turn): now, never (the connection closed), or behind a stream. */
  turn(request: IncomingMessage, response: ServerResponse): Promise<Turn> {
    return this.#turns.turn(request, response);
  }

  /** Answers a HEAD: the head a stream would have, and no body; no stream is opened. */
  answerHead(response: ServerResponse, headers: Record<string, string | number | string[]>): void {
    writeStreamHead(response, headers);
    response.end();
  }

  /**
   * Answers 200 text/event-stream on `response` (with `headers`) and streams from `start` until the client leaves,
   * it is closed for not reading, its token is refused (`watchToken`), or the server shuts down; resolves then. Called
   * once the request's turn() has come.
   */
  async serve(
    response: ServerResponse,
    headers: Record<string, string | number | string[]>,
    start: StartingPoint & { readonly fromOldestKept: boolean },
    watchToken?: WatchToken,
  ): Promise<void> {
    const { socket } = response;
    // The client left while the starting point was read: its 'close' has been and gone, and nobody waits for a stream.
    if (socket === null || socket.destroyed) return;
    const stream = new EventStream(response, socket, this);
    this.#open.add(stream);
    this.#turns.streamStarted(socket);
    this.observer?.streamOpened();
    this.#heartbeat ??= setInterval(() => {
      for (const open of this.#open) open.heartbeat();
    }, this.settings.heartbeatMs).unref();
    writeStreamHead(response, headers);
    response.write(`retry: ${RETRY_MS}\n\n`);
    // A stream is bounded as a connection (MAX_CONNECTIONS, the stream limits), not as a request waiting for its answer.
    stopCountingAsPending(response);
    const watch = watchToken?.((error) => stream.refuse(error));
    try {
      await stream.run(start);
    } catch (error) {
      stream.end('error');
      response.destroy();
      this.settings.onError(error);
    }
    await stream.done;
    watch?.stop();
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
