/** The CLI's own errors: how a command was called, not what went wrong while it ran. Their exit codes are in exit-codes.ts. */

/** A mistake in how the command was called (a missing or malformed argument): exit code 2, with a pointer to the usage. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A command this database cannot do, and what to use instead: exit code 2, without the pointer to the usage. */
export class WrongDatabaseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WrongDatabaseError';
  }
}

/** parseArgs' own errors (an unknown option, a missing value) are usage errors too; they carry a code, not a class. */
export function isParseArgsError(error: unknown): boolean {
  return typeof (error as { code?: unknown } | null)?.code === 'string' && (error as { code: string }).code.startsWith('ERR_PARSE_ARGS');
}
