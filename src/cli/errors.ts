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

/**
 * A file, folder or URL named on the command line that cannot be used (missing, a folder, nothing listening there):
 * exit code 1. Its message names the argument or option it came from and what to do, never only Node's error code.
 */
export class UnusableArgumentError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UnusableArgumentError';
  }
}

/** parseArgs' own errors (an unknown option, a missing value) are usage errors too; they carry a code, not a class. */
export function isParseArgsError(error: unknown): boolean {
  return typeof (error as { code?: unknown } | null)?.code === 'string' && (error as { code: string }).code.startsWith('ERR_PARSE_ARGS');
}

/**
 * The option the operator most likely meant by `given` (an unknown option such as `--nmae`), among the options
 * `known` a command's usage lists: one within two edits (a transposition counts as one), or the only one `given`
 * begins. Undefined when none is close enough to be worth suggesting.
 */
export function nearestOption(given: string, known: readonly string[]): string | undefined {
  let best: { option: string; distance: number } | undefined;
  for (const option of new Set(known)) {
    const distance = editDistance(given, option);
    if (distance <= 2 && (best === undefined || distance < best.distance)) best = { option, distance };
  }
  if (best) return best.option;
  const extensions = [...new Set(known)].filter((option) => given.length >= 4 && option.startsWith(given));
  return extensions.length === 1 ? extensions[0] : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours, one each. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      const substitution = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + substitution);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, at(i - 2, j - 2) + 1);
      (rows[i] as number[])[j] = distance;
    }
  }
  return at(a.length, b.length);
}
