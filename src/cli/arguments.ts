import path from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError } from './errors.js';

/** The one FILE argument of `command` (backup, restore), as an absolute path. */
export function oneFile(args: string[], command: string): string {
  const { positionals } = parseArgs({ args, options: {}, allowPositionals: true, strict: true });
  const [file] = positionals;
  if (file === undefined || file === '' || positionals.length !== 1) throw new UsageError(`${command} needs exactly one FILE`);
  return path.resolve(file);
}
