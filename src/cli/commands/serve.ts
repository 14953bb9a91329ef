import { serveUntilSignalled } from '../../serve/server.js';
import type { CommandContext } from '../command.js';
import { NEW_OR_EXISTING_DATABASE } from '../database.js';
import { UsageError } from '../errors.js';

export const usage = '  serve                       run the HTTP service (what npm start runs)';

export async function run(args: string[], context: CommandContext): Promise<void> {
  if (args.length > 0) throw new UsageError(`serve takes no arguments, got ${JSON.stringify(args.join(' '))}`);
  await serveUntilSignalled(context.config(), NEW_OR_EXISTING_DATABASE);
}
