/**
 * The one mapping from anything a command throws to what the operator sees (the line on stderr) and what a script
 * sees (the exit code), as src/http/error-reply.ts is for HTTP clients.
 *
 * Exit codes: 0 done; 1 the command ran and failed (a name taken, a file refused, the database busy or missing); 2
 * it was called wrongly (usage, configuration, or a command this database cannot do). A usage error adds where to
 * read the usage, at most three lines in all.
 */
import { ConfigError } from '../config/variables.js';
import {
  DatabaseInUseError,
  DatabaseMissingError,
  DuplicateTokenNameError,
  DuplicateWebhookNameError,
  UnusableDatabaseFileError,
} from '../storage/errors.js';
import { TargetHoldsOtherDataError } from '../transfer/copy.js';
import { ImportStoppedError } from '../transfer/import.js';
import { UnusableArgumentError, UsageError, WrongDatabaseError, isParseArgsError, nearestOption } from './errors.js';

export interface CommandFailure {
  readonly exitCode: number;
  /** Printed on stderr as it is: one line, or a usage error's two. */
  readonly text: string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- an error class, whatever its constructor takes
type ErrorClass = abstract new (...args: any[]) => Error;

/** Errors whose message already says all the operator needs; first match wins. */
const KNOWN: ReadonlyArray<{ readonly type: ErrorClass; readonly exitCode: number; readonly prefix?: string }> = [
  { type: ConfigError, exitCode: 2, prefix: 'invalid configuration: ' },
  { type: WrongDatabaseError, exitCode: 2 },
  { type: UnusableArgumentError, exitCode: 1 },
  { type: DuplicateTokenNameError, exitCode: 1 },
  { type: DuplicateWebhookNameError, exitCode: 1 },
  { type: UnusableDatabaseFileError, exitCode: 1 },
  { type: DatabaseInUseError, exitCode: 1 },
  { type: DatabaseMissingError, exitCode: 1 },
  { type: TargetHoldsOtherDataError, exitCode: 1 },
  { type: ImportStoppedError, exitCode: 1 },
];

/**
 * What `error`, thrown by `command` (undefined when no command was recognised), ends with. `usageCommand` is what
 * `--help` is asked of: `plantstore token --help` for `token create`; `knownOptions`, the options its usage lists,
 * of which the nearest is suggested for an unknown one.
 */
export function commandFailure(error: unknown, usageCommand: string | undefined, knownOptions: readonly string[] = []): CommandFailure {
  if (error instanceof UsageError || isParseArgsError(error)) {
    const help = usageCommand === undefined ? 'plantstore --help' : `plantstore ${usageCommand} --help`;
    return { exitCode: 2, text: `plantstore: ${usageMessage(error as Error, knownOptions)}\nrun '${help}' for usage\n` };
  }
  const known = KNOWN.find(({ type }) => error instanceof type);
  if (known) return { exitCode: known.exitCode, text: `plantstore: ${known.prefix ?? ''}${(error as Error).message}\n` };
  // Anything else: the operator needs the underlying cause (which file, which server), which an HTTP client never sees.
  const cause = (error as { cause?: { message?: string } } | null)?.cause?.message;
  const message = (error as { message?: string } | null)?.message ?? String(error);
  return { exitCode: 1, text: `plantstore: ${message}${cause ? ` (${cause})` : ''}\n` };
}

/** A usage error's line: for an unknown option, with the nearest known one when one is close (`--nmae`: `--name`). */
function usageMessage(error: Error, knownOptions: readonly string[]): string {
  if ((error as { code?: unknown }).code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return error.message;
  const unknown = /^Unknown option '([^']+)'/.exec(error.message)?.[1];
  const nearest = unknown === undefined ? undefined : nearestOption(unknown, knownOptions);
  return nearest === undefined ? error.message : `unknown option '${unknown}'; did you mean ${nearest}?`;
}
