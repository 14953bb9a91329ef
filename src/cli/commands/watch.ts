import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { serverEndpoint } from '../arguments.js';
import type { CommandContext } from '../command.js';
import { errorMessage } from '../output.js';
import { UsageError } from '../errors.js';

/** watch talks to a server, not to a database: its --help says so instead of naming DATABASE_URL. */
export const readsDatabase = false;

export const usage = `  watch --url URL --token-file TOKEN_FILE [--after N]
                              follow a running server's change feed (GET /plants/events): one JSON line per
                              change on stdout, {"sequence":N,"event":"plant.created","data":{...}}, ids exact;
                              reconnects by itself after the last sequence printed; --after 0 replays every
                              change kept; the token (plants:read) is read from TOKEN_FILE`;

/** Waits between reconnections: doubled after each failure in a row, from the server's `retry:` up to this. */
const MAX_RECONNECT_DELAY_MS = 30_000;

/** A refusal no reconnection can cure: a bad token, a missing scope, a bad cursor. */
class Refused extends Error {}

const CURSOR = /^(0|[1-9][0-9]{0,18})$/;

/** One event parsed from the stream. */
interface StreamEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: string;
}

/**
 * The events of a text/event-stream body, as they arrive (WHATWG HTML, "Interpreting an event stream"): fields
 * `event`, `id`, `data` (lines joined by \n) and `retry`; comment lines skipped.
 */
async function* readEvents(body: AsyncIterable<Buffer>, onRetry: (ms: number) => void): AsyncGenerator<StreamEvent> {
  let pending = '';
  let event = 'message';
  let id: string | undefined;
  let data: string[] = [];
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    pending += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = pending.search(/\r\n|\r|\n/)) !== -1) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + (pending.startsWith('\r\n', end) ? 2 : 1));
      if (line === '') {
        if (data.length > 0) yield { event, id, data: data.join('\n') };
        event = 'message';
        id = undefined;
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'id') id = value;
      else if (field === 'data') data.push(value);
      else if (field === 'retry' && /^\d+$/.test(value)) onRetry(Number(value));
    }
  }
}

export async function run(args: string[], context: CommandContext): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { url: { type: 'string' }, 'token-file': { type: 'string' }, after: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new UsageError(`watch takes no FILE, got ${JSON.stringify(positionals[0])}`);
  if (values.after !== undefined && !CURSOR.test(values.after)) throw new UsageError(`--after must be a non-negative integer (a sequence), got ${JSON.stringify(values.after)}`);
  const { url, token } = serverEndpoint(values, 'watch', '/plants/events', 'plants:read');
  void context;

  let cursor = values.after;
  let retryMs = 2000;
  let failures = 0;
  const stop = new AbortController();
  const stopOn = () => stop.abort();
  process.once('SIGINT', stopOn);
  process.once('SIGTERM', stopOn);
  try {
    while (!stop.signal.aborted) {
      try {
        const answer = await request(url, {
          headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...(cursor === undefined ? {} : { 'last-event-id': cursor }) },
          signal: stop.signal,
          // A live stream is silent between changes but for its keep-alive comments: no whole-answer timeout.
          bodyTimeout: 0,
          headersTimeout: 30_000,
        });
        if (answer.statusCode !== 200) {
          const message = errorMessage(await answer.body.text());
          if (answer.statusCode >= 400 && answer.statusCode < 500 && answer.statusCode !== 408 && answer.statusCode !== 429) {
            throw new Refused(`the server answered ${answer.statusCode}: ${message}`);
          }
          throw new Error(`the server answered ${answer.statusCode}: ${message}`);
        }
        for await (const event of readEvents(answer.body, (ms) => (retryMs = ms))) {
          failures = 0;
          if (event.id !== undefined && CURSOR.test(event.id)) cursor = event.id;
          // The data is JSON as the server wrote it, ids with all their digits: copied, never parsed into numbers.
          process.stdout.write(`{"sequence":${event.id ?? 'null'},"event":${JSON.stringify(event.event)},"data":${event.data}}\n`);
        }
      } catch (error) {
        if (error instanceof Refused) throw error;
        if (stop.signal.aborted) break;
        failures += 1;
        process.stderr.write(`watch: ${(error as Error).message ?? error}; reconnecting${cursor === undefined ? '' : ` after ${cursor}`}\n`);
      }
      if (stop.signal.aborted) break;
      // The stream ended (the server shutting down) or failed: reconnect after the last sequence printed.
      await sleep(Math.min(MAX_RECONNECT_DELAY_MS, retryMs * 2 ** Math.max(0, failures - 1)), undefined, { signal: stop.signal }).catch(() => undefined);
    }
  } catch (error) {
    if (error instanceof Refused) {
      process.stderr.write(`watch: ${error.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw error;
  } finally {
    process.off('SIGINT', stopOn);
    process.off('SIGTERM', stopOn);
  }
}
