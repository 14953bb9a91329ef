import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { NDJSON } from '../../http/ndjson.js';
import { readLines } from '../../transfer/lines.js';
import { openForReading, serverEndpoint } from '../arguments.js';
import type { CommandContext } from '../command.js';
import { UnusableArgumentError, UsageError } from '../errors.js';
import { ProgressLine, errorMessage } from '../output.js';

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

interface ResultLine {
  readonly line: number;
  readonly status: number;
  readonly created?: boolean;
  readonly message?: string;
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
  const code = (error as { code?: unknown } | null)?.code;
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

export async function run(args: string[], context: CommandContext): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { url: { type: 'string' }, 'token-file': { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  const [file] = positionals;
  if (file === undefined || positionals.length !== 1) throw new UsageError('push needs exactly one FILE (- for standard input)');
  const { url, token } = serverEndpoint(values, 'push', '/plants', 'plants:create');
  // Answer lines are at most a message long; the limit only keeps a broken server from growing one line without end.
  const maxAnswerLine = context.config().limits.bodyBytes + 1024;

  const body = input(file);
  let answer: Awaited<ReturnType<typeof request>>;
  try {
    answer = await request(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': NDJSON },
      body,
      // The answer streams as lines commit, for as long as the file takes: no whole-answer timeout, only silence.
      bodyTimeout: 0,
      headersTimeout: 0,
    });
  } catch (error) {
    body.destroy();
    throw unreachable(url, error);
  }
  if (answer.statusCode !== 200) {
    const message = errorMessage(await answer.body.text());
    process.stderr.write(`push: the server answered ${answer.statusCode}: ${message}\n`);
    process.exitCode = 1;
    return;
  }

  const counts: PushCounts = { answered: 0, created: 0, replayed: 0, conflicts: 0, bad: 0, refused: 0 };
  const progress = new ProgressLine();
  try {
    for await (const lines of readLines(answer.body, maxAnswerLine)) {
      for (const line of lines) {
        if (!('text' in line)) throw new Error(`the server answered a line of ${line.tooLongBytes} bytes, which is no result line`);
        const result = JSON.parse(line.text.toString('utf8')) as ResultLine;
        counts.answered += 1;
        if (result.status === 200) {
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
