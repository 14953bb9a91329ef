import { answerError, endpoint, networkError, type Transport } from './http.js';
import { exactId } from './json.js';
import { decodedLines, wholeLines } from './lines.js';
import type { BulkLine, BulkResult, NewPlant } from './types.js';

/**
 * A streamed bulk create: `POST /plants` as application/x-ndjson, one NewPlant a line, the results read as they
 * come while the lines are still being sent. The request body is pulled from the source only as fast as the
 * connection takes it, so memory holds the lines in flight, never the input.
 */

export type PlantSource = Iterable<NewPlant> | AsyncIterable<NewPlant>;

export interface BulkOptions {
  readonly signal?: AbortSignal;
  /**
   * Stream the whole source as one request (true), or send it in requests of `batchLines` lines each (false). By
   * default a runtime that can stream a request body over HTTP/1.1 (Node) streams; a browser sends batches, since
   * browsers stream request bodies only over HTTP/2 or not at all.
   */
  readonly stream?: boolean;
  /** Lines per request when not streaming. */
  readonly batchLines?: number;
}

/** The NDJSON request line of a plant: the id exact, refused before sending when it cannot be. */
export function plantLine(plant: NewPlant): { readonly id: bigint; readonly text: string } {
  const id = exactId(plant.id, 'plant id');
  return { id, text: lineText(plant, id) };
}

/** The JSON text of `plant` whose exact id is `id`, its name and tag checked. */
function lineText(plant: NewPlant, id: bigint): string {
  if (typeof plant.name !== 'string') throw new TypeError(`plant ${id}: name must be a string`);
  if (plant.tag !== undefined && typeof plant.tag !== 'string') throw new TypeError(`plant ${id}: tag must be a string when given`);
  const tag = plant.tag === undefined ? '' : `,"tag":${JSON.stringify(plant.tag)}`;
  return `{"id":${id},"name":${JSON.stringify(plant.name)}${tag}}`;
}

/** Result lines are at most an Error record long; this only stops a broken server's endless line. */
const MAX_RESULT_BYTES = 1 << 20;
/**
 * Request bytes gathered into one chunk of the body: fewer, larger writes. Lines are encoded into the chunk's bytes a
 * few at a time, so a collection that comes while a chunk fills finds a few lines' text alive, not a chunk's: what
 * survives collections is what makes V8 widen its young generation, and with it the resident memory.
 */
const CHUNK_BYTES = 64 * 1024;
/** Text of lines encoded into a chunk at once. */
const BATCH_CHARS = 2048;

/**
 * Ids of the lines sent and not yet answered, in order: a ring of raw int64s, so the ids in flight are no heap
 * objects that survive collections (which would make V8 widen its young generation).
 */
class IdQueue {
  #ring = new BigInt64Array(1024);
  #head = 0;
  #size = 0;
  /** The request line number of the id at the head. */
  #firstLine = 1;
  push(id: bigint): void {
    if (this.#size === this.#ring.length) {
      const grown = new BigInt64Array(this.#ring.length * 2);
      for (let i = 0; i < this.#size; i += 1) grown[i] = this.#ring[(this.#head + i) % this.#ring.length] as bigint;
      this.#ring = grown;
      this.#head = 0;
    }
    this.#ring[(this.#head + this.#size) % this.#ring.length] = id;
    this.#size += 1;
  }
  /** The id of request line `line`, dropping those before it (a final refusal may answer a later line). */
  take(line: number): bigint | undefined {
    while (this.#firstLine < line && this.#size > 0) this.#shift();
    if (this.#firstLine !== line || this.#size === 0) return undefined;
    return this.#shift();
  }
  #shift(): bigint {
    const id = this.#ring[this.#head] as bigint;
    this.#head = (this.#head + 1) % this.#ring.length;
    this.#size -= 1;
    this.#firstLine += 1;
    return id;
  }
}

function isStreamingRuntime(): boolean {
  const versions = (globalThis as { process?: { versions?: { node?: string } } }).process?.versions;
  return typeof versions?.node === 'string';
}

/** Lines of the source gathered into chunks of up to CHUNK_BYTES, as a byte stream pulled on demand. */
function requestBody(source: PlantSource, ids: IdQueue, failed: (error: unknown) => void): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const sync = Symbol.iterator in source ? (source as Iterable<NewPlant>)[Symbol.iterator]() : undefined;
  const iterator = sync ?? (source as AsyncIterable<NewPlant>)[Symbol.asyncIterator]();
  // Text that did not fit in the last chunk: it opens the next one (a line may span two chunks of the byte stream).
  let carried = '';
  let ended = false;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          // A fresh buffer each time: the stream holds an enqueued chunk until the socket has taken it.
          const chunk = new Uint8Array(CHUNK_BYTES);
          let used = 0;
          while (used < CHUNK_BYTES) {
            let text = carried;
            carried = '';
            // A few lines' text at a time, then their bytes: fewer encoder calls, and little text alive.
            while (!ended && text.length < BATCH_CHARS) {
              const next = sync ? sync.next() : await iterator.next();
              if (next.done) {
                ended = true;
                break;
              }
              const id = exactId(next.value.id, 'plant id');
              text += `${lineText(next.value, id)}\n`;
              ids.push(id);
            }
            if (text === '') break;
            const { read, written } = encoder.encodeInto(text, chunk.subarray(used));
            used += written;
            if (read < text.length) {
              // The chunk is full (but for a character's bytes at most).
              carried = text.slice(read);
              break;
            }
          }
          if (used > 0) controller.enqueue(used === CHUNK_BYTES ? chunk : chunk.subarray(0, used));
          else controller.close();
        } catch (error) {
          failed(error);
          controller.error(error);
        }
      },
      async cancel() {
        await iterator.return?.();
      },
    },
    { highWaterMark: 1 },
  );
}

/**
 * The answer of one bulk request whose body is `body`, as it arrives: pieces of whole result lines, still bytes
 * (decodedLines reads them). A piece per read keeps the awaits per read, not per line.
 */
async function* bulkRequest(t: Transport, body: NonNullable<RequestInit['body']>, signal: AbortSignal | undefined, sourceFailure: () => unknown): AsyncGenerator<Uint8Array> {
  let response: Response;
  try {
    response = await t.fetch(endpoint(t, 'plants'), {
      method: 'POST',
      headers: { ...t.headers, 'content-type': 'application/x-ndjson' },
      body,
      // Node's fetch sends a stream only when told the answer may come while it is sent.
      duplex: 'half',
      // A stream cannot be sent again to follow a redirect; and a fetch that may redirect tees the body, keeping a
      // copy of every byte sent in the branch it never reads (Node's fetch does), which grows with the input.
      redirect: 'error',
      ...(signal ? { signal } : {}),
    } as RequestInit);
  } catch (error) {
    throw sourceFailure() ?? (signal?.aborted ? error : networkError(error));
  }
  if (response.status !== 200) throw await answerError(response);
  if (!response.body) return;
  try {
    yield* wholeLines(response.body, MAX_RESULT_BYTES);
  } catch (error) {
    throw sourceFailure() ?? error;
  }
  const failure = sourceFailure();
  if (failure !== undefined) throw failure;
}

/** One result line, to be numbered and given its id; a line that is no JSON fails as the source did, if it did. */
function parseResult(text: string, sourceFailure: () => unknown): { line: number; id?: bigint | undefined } {
  try {
    return JSON.parse(text) as { line: number };
  } catch (error) {
    throw sourceFailure() ?? error;
  }
}

/** The results of the plants of `source`, in order, each with the id it sent. */
export async function* createMany(t: Transport, source: PlantSource, options: BulkOptions = {}): AsyncGenerator<BulkResult> {
  const streamed = options.stream ?? isStreamingRuntime();
  const ids = new IdQueue();
  let failure: unknown;
  const failed = (error: unknown) => (failure = error);
  if (streamed) {
    const body = requestBody(source, ids, failed);
    const decoder = new TextDecoder();
    for await (const bytes of bulkRequest(t, body, options.signal, () => failure)) {
      // Each line parsed only when its turn comes: a read's results are never all objects at once.
      for (const text of decodedLines(bytes, decoder)) {
        const result = parseResult(text, () => failure);
        result.id = ids.take(result.line);
        yield result as BulkResult;
      }
    }
    return;
  }
  const batch = options.batchLines ?? 1000;
  // One iterator across the batches: each request takes its share of lines from where the last one stopped.
  const iterator = Symbol.iterator in source ? (source as Iterable<NewPlant>)[Symbol.iterator]() : (source as AsyncIterable<NewPlant>)[Symbol.asyncIterator]();
  let offset = 0;
  for (;;) {
    let text = '';
    let count = 0;
    const batchIds = new IdQueue();
    while (count < batch) {
      const next = await iterator.next();
      if (next.done) break;
      const line = plantLine(next.value);
      batchIds.push(line.id);
      text += `${line.text}\n`;
      count += 1;
    }
    if (count === 0) return;
    const decoder = new TextDecoder();
    for await (const bytes of bulkRequest(t, text, options.signal, () => undefined)) {
      for (const line of decodedLines(bytes, decoder)) {
        const result = parseResult(line, () => undefined);
        result.id = batchIds.take(result.line);
        result.line += offset;
        yield result as BulkResult;
      }
    }
    offset += count;
    if (count < batch) return;
  }
}

/** A bulk create of NDJSON bytes as they are (the server splits and checks the lines): the results, in order. */
export async function* createLines(t: Transport, body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<BulkLine[]> {
  const decoder = new TextDecoder();
  for await (const bytes of bulkRequest(t, body, signal, () => undefined)) {
    const results: BulkLine[] = [];
    for (const text of decodedLines(bytes, decoder)) results.push(parseResult(text, () => undefined) as BulkLine);
    yield results;
  }
}
