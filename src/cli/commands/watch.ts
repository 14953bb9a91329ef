import { parseArgs } from 'node:util';
import { PlantStore, PlantStoreError, stringifyExact, type Change } from '../../client/index.js';
import { serverEndpoint } from '../arguments.js';
import { cliFetch } from '../client-fetch.js';
import type { CommandContext } from '../command.js';
import { UsageError } from '../errors.js';

/** watch talks to a server, not to a database: its --help says so instead of naming DATABASE_URL. */
export const readsDatabase = false;

export const usage = `  watch --url URL --token-file TOKEN_FILE [--after N]
                              follow a running server's change feed (GET /plants/events): one JSON line per
                              change on stdout, {"sequence":N,"event":"plant.created","data":{...}}, ids exact;
                              reconnects by itself after the last sequence printed; --after 0 replays every
                              change kept; the token (plants:read) is read from TOKEN_FILE`;

const CURSOR = /^(0|[1-9][0-9]{0,18})$/;

/** The event's data as the server wrote it: the client parsed it with exact ids, and writes it back the same. */
function data(change: Change): string {
  if (change.type === 'plant.created') return stringifyExact(change.plant);
  if (change.type === 'plant.deleted') return `{"id":${change.id}}`;
  return JSON.stringify({ message: change.message });
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

  // A live stream is silent between changes but for its keep-alive comments: no whole-answer timeout.
  const client = new PlantStore({ url: new URL('/', url), token, fetch: cliFetch({ headersTimeout: 30_000, bodyTimeout: 0 }) });
  const stop = new AbortController();
  const stopOn = () => stop.abort();
  process.once('SIGINT', stopOn);
  process.once('SIGTERM', stopOn);
  try {
    const changes = client.watch({
      ...(values.after === undefined ? {} : { after: BigInt(values.after) }),
      signal: stop.signal,
      onReconnect: (reason, after) => {
        if (reason) process.stderr.write(`watch: ${reason.message}; reconnecting${after === undefined ? '' : ` after ${after}`}\n`);
      },
    });
    for await (const change of changes) {
      process.stdout.write(`{"sequence":${change.sequence},"event":${JSON.stringify(change.type)},"data":${data(change)}}\n`);
    }
  } catch (error) {
    // A refusal no reconnection can cure: a bad token, a missing scope, a bad cursor.
    if (error instanceof PlantStoreError && error.status >= 400) {
      process.stderr.write(`watch: the server answered ${error.status}: ${error.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw error;
  } finally {
    process.off('SIGINT', stopOn);
    process.off('SIGTERM', stopOn);
  }
}
