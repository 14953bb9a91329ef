import { PlantStoreError } from './errors.js';
import { answerError, endpoint, networkError, retryAfterSeconds, sleep, type Transport } from './http.js';
import { parseExact } from './json.js';
import { streamEvents } from './lines.js';
import type { Change, StoredPlant } from './types.js';

export interface WatchOptions {
  /**
   * The sequence to start after: every change after it, in order, then the live ones (0n: every change kept). Without
   * it the feed starts at its newest change.
   */
  readonly after?: bigint | number;
  /** Stops the watch: the iteration ends (no error). */
  readonly signal?: AbortSignal;
  /**
   * Told of each reconnection before its wait, with the cursor it resumes after: `reason` is the failure, undefined
   * when the server ended the stream (a restart or a shutdown).
   */
  readonly onReconnect?: (reason: Error | undefined, after: bigint | undefined) => void;
}

/** Waits between reconnections: doubled after each failure in a row, from the server's `retry:` up to this. */
const MAX_RECONNECT_DELAY_MS = 30_000;
/** Events are one plant at most; this only stops a broken server's endless event. */
const MAX_EVENT_CHARS = 1 << 20;

/** A change of the feed from an event, or undefined for an event this client does not know (skipped). */
function change(event: string, sequence: bigint, data: string): Change | undefined {
  const value = parseExact<Record<string, unknown>>(data);
  if (event === 'plant.created') return { type: 'plant.created', sequence, plant: value as unknown as StoredPlant };
  if (event === 'plant.deleted') return { type: 'plant.deleted', sequence, id: value.id as bigint };
  if (event === 'reset') return { type: 'reset', sequence, message: String(value.message ?? '') };
  return undefined;
}

/** A refusal no reconnection cures: a bad token, a missing scope, a bad cursor. */
function final(error: PlantStoreError): boolean {
  return error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429;
}

/**
 * The change feed, reconnecting by itself after a dropped connection, a server's restart or its shutdown, from the
 * last sequence yielded (Last-Event-ID): every change after the cursor once, in order.
 */
export async function* watch(t: Transport, options: WatchOptions = {}): AsyncGenerator<Change> {
  let cursor = options.after === undefined ? undefined : BigInt(options.after);
  if (cursor !== undefined && cursor < 0n) throw new RangeError(`after must be a non-negative sequence, got ${cursor}`);
  const stop = new AbortController();
  const signal = options.signal;
  const abort = () => stop.abort(signal?.reason);
  if (signal?.aborted) return;
  signal?.addEventListener('abort', abort, { once: true });
  let retryMs = 2000;
  let failures = 0;
  try {
    while (!stop.signal.aborted) {
      let wait: number | undefined;
      let reason: Error | undefined;
      try {
        const headers: Record<string, string> = { ...t.headers, accept: 'text/event-stream' };
        if (cursor !== undefined) headers['last-event-id'] = cursor.toString();
        let response: Response;
        try {
          response = await t.fetch(endpoint(t, 'plants/events'), { headers, signal: stop.signal });
        } catch (error) {
          throw stop.signal.aborted ? error : networkError(error);
        }
        if (response.status !== 200) {
          const refusal = await answerError(response);
          if (final(refusal)) throw refusal;
          const after = retryAfterSeconds(response.headers);
          if (after !== undefined) wait = after * 1000;
          throw refusal;
        }
        if (!response.body) throw new Error('the server answered no stream');
        for await (const event of streamEvents(response.body, (ms) => (retryMs = ms), MAX_EVENT_CHARS)) {
          if (event.id === undefined || !/^(0|[1-9]\d*)$/.test(event.id)) continue;
          const sequence = BigInt(event.id);
          const next = change(event.event, sequence, event.data);
          failures = 0;
          cursor = sequence;
          if (next) yield next;
        }
      } catch (error) {
        if (stop.signal.aborted) return;
        if (error instanceof PlantStoreError && final(error)) throw error;
        failures += 1;
        reason = error instanceof Error ? error : new Error(String(error));
      }
      if (stop.signal.aborted) return;
      options.onReconnect?.(reason, cursor);
      const backoff = Math.min(MAX_RECONNECT_DELAY_MS, retryMs * 2 ** Math.max(0, failures - 1));
      try {
        await sleep(Math.max(wait ?? 0, backoff * (0.8 + Math.random() * 0.4)), stop.signal);
      } catch {
        return;
      }
    }
  } finally {
    signal?.removeEventListener('abort', abort);
    stop.abort();
  }
}
