import fs from 'node:fs';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { PlantStore, PlantStoreError, type BulkLine } from '../../client/index.js';
import { openForReading, serverEndpoint } from '../arguments.js';
import { cliFetch } from '../client-fetch.js';
import type { CommandContext } from '../command.js';
import { UnusableArgumentError, UsageError } from '../errors.js';
import { ProgressLine } from '../output.js';

export const usage = `  push FILE --url URL --token-file TOKEN_FILE
                              send the NewPlant JSON lines of FILE (- for standard input) to a running server
                              as one streamed POST /plants (application/x-ndjson); the token (plants:create)
                              is read from TOKEN_FILE, never from the command line; reports each refused line`;

export interface PushCounts {
  /** Result lines received. */
  answered: number;
  created: number;
  /** Identical replays of plants already stored. */
  replayed: number;
  /** 409: the id is stored with another name or tag. */
  conflicts: number;
  /** 400 and 413: lines that are no valid NewPlant, or too long. */
  bad: number;
  /** Anything else (503: storage or the write queue refused; a final 408 or 413 line: the rest was not read). */
  refused: number;
}

function summary(counts: Readonly<PushCounts>): string {
  return (
    `${counts.answered} lines answered: ${counts.created} created, ${counts.replayed} replayed, ` +
    `${counts.conflicts} conflicts, ${counts.bad} bad lines, ${counts.refused} refused`
  );
}

/** push talks to a server, not to a database: its --help says so instead of naming DATABASE_URL. */
export const readsDatabase = false;

/**
 * The file's bytes as they are: the server splits and reads the lines, exactly as it does any client's. Opened
 * before the request, so a missing FILE is reported as such rather than as a request that failed.
 */
function input(file: string): Readable {
  if (file === '-') return process.stdin;
  return fs.createReadStream('', { fd: openForReading(file, 'push FILE', 'name a file of NewPlant JSON lines, or - for standard input') });
}

/** Errors of connecting to --url, in words, with what to do; Node's own message is a bare `connect ECONNREFUSED …`. */
function unreachable(url: URL, error: unknown): Error {
  // The client's network error wraps fetch's, whose cause is the socket's error with its code.
  let cause: unknown = error;
  while (cause instanceof Error && (cause as { code?: unknown }).code === undefined && cause.cause !== undefined) cause = cause.cause;
  const code = (cause as { code?: unknown } | null)?.code;
  const where = `push --url ${url.origin}`;
  switch (code) {
    case 'ECONNREFUSED':
      return new UnusableArgumentError(
        `${where}: nothing listens at ${url.host} (connection refused); start the server there (plantstore serve) or correct --url`,
        { cause: error },
      );
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new UnusableArgumentError(`${where}: the host ${url.hostname} was not found; correct --url`, { cause: error });
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return new UnusableArgumentError(
        `${where}: ${url.host} cannot be reached (${String(code)}); check --url and that the network lets you reach it`,
        { cause: error },
      );
    default:
      return error instanceof Error ? error : new Error(String(error));
  }
}

export async function run(args: string[], _context: CommandContext): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { url: { type: 'string' }, 'token-file': { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  const [file] = positionals;
  if (file === undefined || positionals.length !== 1) throw new UsageError('push needs exactly one FILE (- for standard input)');
  const { url, token } = serverEndpoint(values, 'push', '/plants', 'plants:create');
  // The answer streams as lines commit, for as long as the file takes: no whole-answer timeout, only silence.
  const client = new PlantStore({ url: new URL('/', url), token, fetch: cliFetch({ headersTimeout: 0, bodyTimeout: 0 }) });
  const body = input(file);
  const results = client.createLines(Readable.toWeb(body) as ReadableStream<Uint8Array>);
  let first: IteratorResult<BulkLine[]>;
  try {
    first = await results.next();
  } catch (error) {
    body.destroy();
    if (error instanceof PlantStoreError && error.status > 0) {
      process.stderr.write(`push: the server answered ${error.status}: ${error.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw unreachable(url, error);
  }

  const counts: PushCounts = { answered: 0, created: 0, replayed: 0, conflicts: 0, bad: 0, refused: 0 };
  const progress = new ProgressLine();
  try {
    for (let next = first; !next.done; next = await results.next()) {
      for (const result of next.value) {
        counts.answered += 1;
        if ('created' in result) {
          if (result.created === false) counts.replayed += 1;
          else counts.created += 1;
          continue;
        }
        if (result.status === 409) counts.conflicts += 1;
        else if (result.status === 400 || (result.status === 413 && result.message?.startsWith('line is longer'))) counts.bad += 1;
        else counts.refused += 1;
        progress.line(`line ${result.line}: ${result.status} ${result.message ?? ''}`);
      }
      progress.update(`push: ${summary(counts)}`);
    }
  } finally {
    progress.clear();
  }
  process.stderr.write(`push: ${summary(counts)}\n`);
  if (counts.conflicts + counts.bad + counts.refused > 0) process.exitCode = 1;
}
