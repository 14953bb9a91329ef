import { Readable } from 'node:stream';
import type { ErrorBody, PlantBody } from '../schemas.js';
import type { Plant } from '../plant.js';
import { isBlank, readLines, type InputLine } from '../transfer/lines.js';

const TIMED_OUT = Symbol('timedOut');
const STOPPING = Symbol('stopping');
/**
 * Lines a stream reads in one go before it lets the event loop turn: a socket read holds some 1,500 lines, and twenty
 * streams each parsing a whole one in the same turn held a single create's answer back by seconds on a busy machine.
 */
const LINES_PER_TURN = 256;

/** The media type of a streamed bulk create, request and answer: one JSON text per line (NDJSON). */
export const NDJSON = 'application/x-ndjson';

/**
 * The body of a `POST /plants` sent as NDJSON: the request stream itself, unread. The content-type parser hands it over
 * as it is, so that the route reads it line by line, as fast as lines commit, instead of a whole body held in memory.
 */
export class LineStreamBody {
  constructor(readonly source: Readable) {}
}

export interface BulkCreateOptions {
  /** The longest line (BODY_LIMIT_BYTES, the single create's body limit); a longer one is answered 413 alone. */
  readonly maxLineBytes: number;
  /** Lines a request may have (BULK_MAX_LINES); the next one is answered by a final 413 line and the rest is not read. */
  readonly maxLines: number;
  /** Lines read and not yet handed to the answer stream at most: the memory of one request, whatever its length. */
  readonly window: number;
  /** The request sends nothing for this long while the server waits for it: a final 408 line, the rest is not read. */
  readonly idleTimeoutMs: number;
  /** One line's text to the plant it asks for, exactly as a single create reads its body; throws the 400 to answer. */
  readonly readPlant: (text: Buffer) => Plant;
  /** The single create: durable before it resolves; throws what the single create would answer. */
  readonly create: (plant: Plant) => Promise<{ readonly plant: Plant; readonly created: boolean }>;
  /** The stored plant as the single create answers it. */
  readonly plantBody: (plant: Plant) => PlantBody;
  /** The Error record the single create would answer for an error. */
  readonly errorRecord: (error: unknown) => ErrorBody;
  /** Resolves when one more line may be created (rate limiting), or undefined when every line may go at once. */
  readonly admitLine?: () => Promise<void> | undefined;
  /**
   * The stream's place in the write queue (WriteLane): before each create, reserve() answers undefined when there is
   * room now, or a promise of a turn (false: the lane closed), and the stream stops reading meanwhile. Closed when the
   * stream ends.
   */
  readonly lane?: { reserve(): Promise<boolean> | undefined; close(): void };
  /**
   * Aborted when the server shuts down: the stream stops reading, answers every line it read, and ends with a final
   * 503 line naming the first line it did not take.
   */
  readonly stopping?: AbortSignal;
  /**
   * Watches the request's token for as long as the stream lasts (TokenAuthenticator.watch): once it is refused (revoked,
   * expired, without the scope) the stream stops reading, answers every line it took, and ends with a final line
   * carrying the refusal's status (401, 403) and naming the first line not taken; nothing after it is stored. Also
   * asked (`check`) before each batch of lines read is taken.
   */
  readonly watchToken?: (onRefused: (error: Error) => void) => { check(): Error | undefined; stop(): void };
}

interface Entry {
  readonly line: number;
  /** The serialized result line, once the line's outcome is known. */
  result: string | undefined;
}

/** The answer to a line that could not be read into a plant, or whose create failed. */
function errorLine(line: number, record: ErrorBody): string {
  return `${JSON.stringify({ line, status: record.error, error: record.error, message: record.message })}\n`;
}

/**
 * The answer to an NDJSON `POST /plants`: a readable stream of result lines, one per non-blank request line, in request
 * order, each written once its line's outcome is known (a 200 only after its plant is committed and fsync'd: it waits
 * for the single create, which waits for group commit).
 *
 * Memory is bounded whatever the request's length: at most `window` lines are read and unanswered, and no line is read
 * while the answer stream is over its high-water mark (the client is not reading): the request stream is then not
 * read either, and TCP's flow control stops the client. Lines are handed to the write queue as they are read, so the
 * lines of one socket read join one group commit, and the next read is parsed while that one commits.
 */
export class BulkCreateAnswer extends Readable {
  readonly #options: BulkCreateOptions;
  readonly #source: LineStreamBody['source'];
  readonly #entries: Entry[] = [];
  #head = 0;
  #flushScheduled = false;
  #backedUp = false;
  #wake: (() => void) | undefined;
  #stopped = false;
  /** The server is shutting down (options.stopping), or the token was refused (`#refused`). */
  #shuttingDown = false;
  /** Why the request's token is refused from now on, if it is: the stream stops as at shutdown, with its own last line. */
  #refused: Error | undefined;
  readonly #watch: { check(): Error | undefined; stop(): void } | undefined;
  readonly #onRefused = (error: Error): void => {
    if (this.#refused !== undefined) return;
    this.#refused = error;
    this.#onStopping();
  };
  readonly #onStopping = (): void => {
    this.#shuttingDown = true;
    this.#options.lane?.close();
    this.#wakeReader();
    this.#stopWaiter?.(STOPPING);
  };
  /** Resolves the reader's current wait (a chunk, a rate-limit token) when shutdown starts. */
  #stopWaiter: ((value: typeof STOPPING) => void) | undefined;
  #reading = true;
  /** True when the request was not read to its end (a limit, a timeout): the connection must close after the answer. */
  unreadRequest = false;

  constructor(source: LineStreamBody['source'], options: BulkCreateOptions) {
    super({ highWaterMark: 16 * 1024 });
    this.#options = options;
    this.#source = source;
    const { stopping } = options;
    if (stopping) {
      if (stopping.aborted) this.#onStopping();
      else stopping.addEventListener('abort', this.#onStopping, { once: true });
    }
    this.#watch = options.watchToken?.(this.#onRefused);
    void this.#readAll();
  }

  override _read(): void {
    this.#backedUp = false;
    this.#wakeReader();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // The client went away (or the answer failed): stop reading. Lines already handed to the write queue still commit
    // or fail whole, each on its own; none is half-written.
    this.#stopped = true;
    // A wait for room in the write queue ends too: the lane is given up.
    this.#options.lane?.close();
    this.#wakeReader();
    callback(error);
  }

  get #inWindow(): number {
    return this.#entries.length - this.#head;
  }

  #hasRoom(): boolean {
    return this.#stopped || this.#shuttingDown || (!this.#backedUp && this.#inWindow < this.#options.window);
  }

  #wakeReader(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** The next lines of the request, TIMED_OUT when it sends nothing for idleTimeoutMs, or STOPPING at shutdown. */
  #nextWithin(next: Promise<IteratorResult<InputLine[]>>): Promise<IteratorResult<InputLine[]> | typeof TIMED_OUT | typeof STOPPING> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), this.#options.idleTimeoutMs);
    });
    return this.#unlessStopping(Promise.race([next, timeout])).finally(() => clearTimeout(timer));
  }

  /**
   * `waiting`, or STOPPING if shutdown starts first. A promise of its own per wait: racing every wait with one
   * long-lived promise would leave a reaction on it per wait, each holding what its wait resolved with (a chunk's
   * lines) until shutdown.
   */
  #unlessStopping<T>(waiting: Promise<T>): Promise<T | typeof STOPPING> {
    if (!this.#options.stopping) return waiting;
    const stopped = new Promise<typeof STOPPING>((resolve) => (this.#stopWaiter = resolve));
    return Promise.race([waiting, stopped]).finally(() => (this.#stopWaiter = undefined));
  }

  /**
   * The last line at shutdown: lines from `line` on were not taken, and can be sent again (to another instance). Or,
   * when the token was refused, the refusal: lines from `line` on were not taken, nor will be with that token.
   */
  #shutdownLine(line: number): void {
    const refused = this.#refused;
    this.#finalLine = errorLine(
      line,
      refused === undefined
        ? { error: 503, message: `the server is shutting down; lines from ${line} on were not read: send them again` }
        : { error: this.#options.errorRecord(refused).error, message: `${refused.message}; lines from ${line} on were not read` },
    );
    this.unreadRequest = true;
  }

  /** Waits until the window has room (the answered lines are flushed, the client reads). */
  async #room(): Promise<void> {
    // Lines answered at once (blank, bad, too long) hold the window until a flush sends them.
    this.#scheduleFlush();
    await new Promise<void>((resolve) => (this.#wake = resolve));
  }

  async #readAll(): Promise<void> {
    const { maxLineBytes, maxLines, readPlant, idleTimeoutMs, lane } = this.#options;
    // Not destroyed when reading stops early (a limit, a timeout): that would close the socket under the answer.
    const chunks = this.#source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>;
    // Blank lines get no answer: a run of them is read as one, a place in the window, whatever its length.
    const lines = readLines(chunks, maxLineBytes, { blankRuns: true })[Symbol.asyncIterator]();
    let lastLine = 0;
    let sinceYield = 0;
    try {
      for (;;) {
        if (this.#shuttingDown) return this.#shutdownLine(lastLine + 1);
        const next = await this.#nextWithin(lines.next());
        if (next === STOPPING) return this.#shutdownLine(lastLine + 1);
        if (next === TIMED_OUT) {
          this.#finalLine = errorLine(lastLine + 1, {
            error: 408,
            message: `the request sent nothing for ${idleTimeoutMs} ms (REQUEST_TIMEOUT_MS); the rest was not read`,
          });
          this.unreadRequest = true;
          return;
        }
        if (next.done) return;
        // A token refused since the last batch (its expiry passed, a reload found it revoked): none of these is taken.
        const refused = this.#watch?.check();
        if (refused) this.#onRefused(refused);
        if (this.#shuttingDown) return this.#shutdownLine(lastLine + 1);
        for (const line of next.value) {
          if (this.#stopped) return;
          if (line.number > maxLines) {
            // The first line over the limit (a run of empty lines comes as one, numbered as its last).
            const over = maxLines + 1;
            this.#finalLine = errorLine(over, {
              error: 413,
              message: `the request has more than ${maxLines} lines (BULK_MAX_LINES); lines from ${over} on were not read`,
            });
            this.unreadRequest = true;
            return;
          }
          // Every line, blank and too long ones included, takes a place in the window until it is flushed: what a
          // stream makes the server hold is bounded by its window whatever it sends.
          if (!this.#hasRoom()) await this.#room();
          else if (++sinceYield >= LINES_PER_TURN) {
            // Let the rest of the event loop in (other clients' requests, commits) between slices of a large chunk.
            sinceYield = 0;
            await new Promise((resolve) => setImmediate(resolve));
          }
          if (this.#stopped) return;
          if (this.#shuttingDown) return this.#shutdownLine(line.number);
          if (!('text' in line)) {
            this.#answered(line.number, errorLine(line.number, {
              error: 413,
              message: `line is longer than the limit of ${maxLineBytes} bytes (BODY_LIMIT_BYTES)`,
            }));
            continue;
          }
          if (isBlank(line.text)) {
            this.#answered(line.number, '');
            continue;
          }
          const admitted = this.#options.admitLine?.();
          if (admitted && (await this.#unlessStopping(admitted)) === STOPPING) {
            return this.#shutdownLine(line.number);
          }
          let plant: Plant;
          try {
            plant = readPlant(line.text);
          } catch (error) {
            this.#answered(line.number, errorLine(line.number, this.#options.errorRecord(error)));
            continue;
          }
          // The write queue has no room for this stream now: it waits its turn, reading nothing meanwhile.
          const reserved = lane?.reserve();
          if (reserved !== undefined && !(await reserved)) {
            if (this.#stopped) return;
            return this.#shutdownLine(line.number);
          }
          if (this.#stopped) return;
          if (this.#shuttingDown) return this.#shutdownLine(line.number);
          const entry: Entry = { line: line.number, result: undefined };
          this.#entries.push(entry);
          this.#options.create(plant).then(
            ({ plant: stored, created }) =>
              this.#settle(entry, `${JSON.stringify({ line: entry.line, status: 200, plant: this.#options.plantBody(stored), created })}\n`),
            (error: unknown) => this.#settle(entry, errorLine(entry.line, this.#options.errorRecord(error))),
          );
        }
        lastLine = next.value.at(-1)?.number ?? lastLine;
        this.#scheduleFlush();
      }
    } catch {
      // The request ended before its end (the client closed it): what was read is answered, as far as it can be.
      this.unreadRequest = true;
    } finally {
      lane?.close();
      this.#watch?.stop();
      this.#options.stopping?.removeEventListener('abort', this.#onStopping);
      this.#reading = false;
      this.#scheduleFlush();
    }
  }

  /** A line whose answer is known as it is read (blank: nothing to write). */
  #answered(line: number, result: string): void {
    this.#entries.push({ line, result });
  }

  /** A last line after every line's result: why the request was not read to its end. */
  #finalLine: string | undefined;
  #ended = false;

  #settle(entry: Entry, result: string): void {
    entry.result = result;
    if (this.#entries[this.#head] === entry) this.#scheduleFlush();
  }

  /** Once per microtask checkpoint: every create of a commit settles in one, and their lines leave in one push. */
  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(this.#flush);
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false;
    if (this.destroyed) return;
    let text = '';
    while (this.#head < this.#entries.length) {
      const result = (this.#entries[this.#head] as Entry).result;
      if (result === undefined) break;
      text += result;
      this.#head += 1;
    }
    // The window is a queue read from the front: dropping its answered part now and then keeps shifting amortized O(1).
    if (this.#head > 1024 && this.#head * 2 > this.#entries.length) {
      this.#entries.splice(0, this.#head);
      this.#head = 0;
    }
    if (text !== '' && !this.push(text)) this.#backedUp = true;
    if (this.#hasRoom()) this.#wakeReader();
    if (!this.#reading && this.#inWindow === 0 && !this.#ended) {
      this.#ended = true;
      if (this.#finalLine !== undefined) this.push(this.#finalLine);
      this.push(null);
    }
  };
}
