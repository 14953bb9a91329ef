/**
 * plantstore/client: the Plant Store's API for Node and browsers, on the platform alone (fetch, streams, Web Crypto),
 * with every int64 id an exact bigint in and out. Nothing here imports the server.
 */
import { createLines, createMany, plantLine, type BulkOptions, type PlantSource } from './bulk.js';
import { PlantConflictError, PlantStoreError } from './errors.js';
import { answerError, call, transport, type ClientOptions, type Transport } from './http.js';
import { exactId, parseExact, type IdInput } from './json.js';
import type { BulkLine, BulkResult, Change, NewPlant, Plant, StoredPlant } from './types.js';
import { watch, type WatchOptions } from './watch.js';

export { PlantConflictError, PlantStoreError, WebhookVerificationError } from './errors.js';
export type { ClientOptions, RetryOptions } from './http.js';
export { exactId, parseExact, stringifyExact, INT64_MAX, INT64_MIN, type IdInput } from './json.js';
export type { BulkLine, BulkResult, Change, ErrorRecord, NewPlant, Plant, StoredPlant, WebhookEvent } from './types.js';
export { FIELDS } from './types.js';
export type { BulkOptions, PlantSource } from './bulk.js';
export type { WatchOptions } from './watch.js';
export { verifyWebhook, type VerifyWebhookInput, type WebhookHeaders } from './webhook.js';

export interface ListOptions {
  /** Only plants with exactly this tag. */
  readonly tag?: string;
  /** Plants per page (1 to 1000; the server's default when absent). The iteration goes on over every page. */
  readonly limit?: number;
  /** Start after this id. */
  readonly after?: IdInput;
  readonly signal?: AbortSignal;
}

export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** The next page's path from a `Link: <…>; rel="next"` header, resolved against the server. */
function nextLink(link: string | null): string | undefined {
  if (!link) return undefined;
  for (const part of link.split(',')) {
    const match = /^\s*<([^>]*)>\s*;(.*)$/.exec(part);
    if (match && /(^|;)\s*rel\s*=\s*"?next"?\s*(;|$)/i.test(match[2] as string)) return match[1];
  }
  return undefined;
}

export class PlantStore {
  readonly #t: Transport;

  constructor(options: ClientOptions) {
    this.#t = transport(options);
  }

  /**
   * Creates a plant: its Plant (`name`, `tag` when given). An identical replay answers the same, so a create is
   * retried after a network error, a 503 or a 429; the same id stored with other content is a PlantConflictError.
   */
  async create(plant: NewPlant, options: CallOptions = {}): Promise<Plant> {
    const { text } = plantLine(plant);
    const response = await call(this.#t, {
      method: 'POST',
      path: 'plants',
      body: text,
      headers: { 'content-type': 'application/json' },
      retry: true,
      signal: options.signal,
    });
    if (response.status !== 200) throw await answerError(response);
    return (await response.json()) as Plant;
  }

  /** The stored plant of `id`, or undefined when there is none. */
  async get(id: IdInput, options: CallOptions = {}): Promise<StoredPlant | undefined> {
    const response = await call(this.#t, { method: 'GET', path: `plants/${exactId(id)}`, retry: true, signal: options.signal });
    if (response.status === 404) {
      await response.body?.cancel();
      return undefined;
    }
    if (response.status !== 200) throw await answerError(response);
    return parseExact<StoredPlant>(await response.text());
  }

  /** Every plant (with `tag`: of that tag) in ascending id order, a page at a time by the keyset cursor. */
  async *list(options: ListOptions = {}): AsyncGenerator<StoredPlant> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.after !== undefined) query.set('after', exactId(options.after, 'after').toString());
    if (options.tag !== undefined) query.set('tag', options.tag);
    let path: string | undefined = `plants${query.size > 0 ? `?${query}` : ''}`;
    while (path !== undefined) {
      const response = await call(this.#t, { method: 'GET', path, retry: true, signal: options.signal });
      if (response.status !== 200) throw await answerError(response);
      const next = nextLink(response.headers.get('link'));
      const page = parseExact<StoredPlant[]>(await response.text());
      yield* page;
      // The link is relative to the server's root: keep this client's base path in front of it.
      path = next?.replace(/^\//, '');
    }
  }

  /** Deletes the plant of `id`: true, or false when there was none (so a retried delete is safe). */
  async delete(id: IdInput, options: CallOptions = {}): Promise<boolean> {
    const response = await call(this.#t, { method: 'DELETE', path: `plants/${exactId(id)}`, retry: true, signal: options.signal });
    await response.body?.cancel();
    if (response.status === 204) return true;
    if (response.status === 404) return false;
    throw await answerError(response);
  }

  /**
   * Creates the plants of `source` (an array, an iterable or an async iterable) as one streamed bulk create, pulling
   * from it only as fast as the server takes them: each line's result, in order, with the id it sent. Not retried:
   * a line's 503 is its own result, and creates are idempotent, so send those again.
   */
  createMany(source: PlantSource, options: BulkOptions = {}): AsyncGenerator<BulkResult> {
    return createMany(this.#t, source, options);
  }

  /** A bulk create of NDJSON bytes as they are (the server reads and checks the lines): the results, in batches. */
  createLines(body: ReadableStream<Uint8Array>, options: CallOptions = {}): AsyncGenerator<BulkLine[]> {
    return createLines(this.#t, body, options.signal);
  }

  /** The change feed: plant.created, plant.deleted and reset, resuming by itself from the last sequence yielded. */
  watch(options: WatchOptions = {}): AsyncGenerator<Change> {
    return watch(this.#t, options);
  }
}

/** Whether an error is a 409 conflict. */
export function isConflict(error: unknown): error is PlantConflictError {
  return error instanceof PlantStoreError && error.status === 409;
}
