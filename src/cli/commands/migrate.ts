import type { CommandContext } from '../command.js';
import { NEW_OR_EXISTING_DATABASE, withStore } from '../database.js';
import { UsageError } from '../errors.js';

export const usage = '  migrate                     create or upgrade the database schema, then exit';

export async function run(args: string[], context: CommandContext): Promise<void> {
  if (args.length > 0) throw new UsageError(`migrate takes no arguments, got ${JSON.stringify(args.join(' '))}`);
  await withStore(context.config(), NEW_OR_EXISTING_DATABASE, async () => undefined);
  process.stderr.write('database schema is up to date\n');
}
