import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TokenWatch } from '../auth/authenticator.js';
import type { ChangeFeed, FeedObserver, StreamEnd } from '../feed/change-feed.js';
import { startingPoint, type StartingPoint } from '../feed/starting-point.js';
import { stopCountingAsPending } from './connection-bounds.js';
import { EVENT_STREAM } from './event-stream-request.js';
import { EventStream } from './open-event-stream.js';
import { StreamTurns, type Turn } from './stream-turns.js';

/**
 * `GET /plants/events`: Server-Sent Events (the WHATWG HTML standard's text/event-stream), one per change of the
 * change log, each with its sequence as its `id:`, so a client resumes exactly where it stopped (Last-Event-ID or
 * `?after=`). A stream first pages through the backlog after its cursor, in batches, waiting for the socket to drain
 * between them; then it joins the event loop's ChangeFeed (src/feed/change-feed.ts) and is handed each new change as
 * the feed reads it. A live stream that does not read is closed once what the server buffers for it passes a bound:
 * the client resumes later from its cursor, and the server never holds more than the bound for it.
 */

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