import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { MissingScopeError } from '../auth/errors.js';
import type { ChangeFeed, FeedBatch, FeedObserver, FeedSubscriber, StreamEnd } from '../feed/change-feed.js';
import { changeEvent, refusedEvent, resetEvent } from '../feed/events.js';
import type { StartingPoint } from '../feed/starting-point.js';
import type { PlantChange } from '../storage/change-store.js';

/** What a stream needs of the streams it is one of (EventStreams, src/http/event-stream.ts). */
export interface StreamRegistry {
  readonly feed: ChangeFeed;
  readonly settings: { readonly bufferBytes: number };
  readonly observer: FeedObserver | undefined;
  forget(stream: EventStream, why: StreamEnd): void;
}

/**
 * One open stream. Once the answer's head is out, events are written to the connection's socket itself, not through
 * the ServerResponse: the body needs no framing (Connection: close, no chunked encoding), and the response corks the
 * socket on each write and uncorks it on the next tick, which would put each stream's write (its syscall) outside the
 * fan-out loop that the feed times (src/feed/change-feed.ts, `loopShare`). The socket keeps the order of the writes.
 */
export class EventStream implements FeedSubscriber {
  readonly #response: ServerResponse;
  readonly #socket: Socket;
  readonly #streams: StreamRegistry;
  #cursor = 0n;
  #live = false;
  /** The stream asked for everything kept (`?after=0`) and has sent nothing yet: a prune meanwhile moves its start on. */
  #fromOldestKept = false;
  #ended: StreamEnd | undefined;
  #unsubscribe: (() => void) | undefined;
  readonly done: Promise<void>;
  #finish!: () => void;

  constructor(response: ServerResponse, socket: Socket, streams: StreamRegistry) {
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
