import { serveUntilSignalled } from '../../serve/server.js';
import { capYoungGeneration } from '../../serve/young-generation.js';
import type { CommandContext } from '../command.js';
import { NEW_OR_EXISTING_DATABASE } from '../database.js';
import { UsageError } from '../errors.js';

export const usage = '  serve                       run the HTTP service (what npm start runs)';

export async function run(args: string[], context: CommandContext): Promise<void> {
  if (args.length > 0) throw new UsageError(`serve takes no arguments, got ${JSON.stringify(args.join(' '))}`);
  const config = context.config();
  // For the process's life (it ends when serving does), and only where the main thread alone serves: the setting is
  // every thread's (see capYoungGeneration).
  if (config.workers === 1) capYoungGeneration();
  await serveUntilSignalled(config, NEW_OR_EXISTING_DATABASE);
}
