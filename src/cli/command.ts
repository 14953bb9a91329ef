import type { Config } from '../config/config.js';

/** What the dispatch gives every command. */
export interface CommandContext {
  /** The configuration, read from the environment (once) when first asked for: `version` needs none, so a bad variable does not stop it. */
  config(): Config;
}

/** One `plantstore <name>`: each module of src/cli/commands/ exports these two. */
export interface Command {
  /** Its lines of the usage text: `plantstore --help` shows every command's, `plantstore <name> --help` its own. */
  readonly usage: string;
  /** False for a command that opens no database (push, version): its --help does not point at DATABASE_URL. */
  readonly readsDatabase?: boolean;
  run(args: string[], context: CommandContext): Promise<void> | void;
}
