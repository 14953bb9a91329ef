/**
 * `plantstore <command> [arguments]`, in this process: finds the command, answers `--help` and `--version`, runs it,
 * and turns whatever it throws into a line on stderr and an exit code (exit-codes.ts). The launcher
 * (plantstore.ts) imports this module, or runs it as the script of a child Node with a bounded heap.
 */
import { DEFAULT_DATABASE_URL, loadConfig, type Config } from '../config/config.js';
import type { Command } from './command.js';
import * as backup from './commands/backup.js';
import * as copy from './commands/copy.js';
import * as exportCommand from './commands/export.js';
import * as importCommand from './commands/import.js';
import * as migrate from './commands/migrate.js';
import * as plants from './commands/plants.js';
import * as push from './commands/push.js';
import * as restore from './commands/restore.js';
import * as serve from './commands/serve.js';
import * as token from './commands/token.js';
import * as version from './commands/version.js';
import * as webhook from './commands/webhook.js';
import { UsageError } from './errors.js';
import { commandFailure } from './exit-codes.js';

/** In the order the usage text lists them. */
const COMMANDS: ReadonlyMap<string, Command> = new Map<string, Command>([
  ['serve', serve],
  ['migrate', migrate],
  ['token', token],
  ['plants', plants],
  ['backup', backup],
  ['restore', restore],
  ['export', exportCommand],
  ['import', importCommand],
  ['push', push],
  ['copy', copy],
  ['webhook', webhook],
  ['version', version],
]);

const HELP_FLAGS = new Set(['--help', '-h']);

const EVERY_SETTING = 'Every setting: docs/configuration.md (in the package and the repository).';

/** The commands that open no database, by name. */
function withoutDatabase(): string[] {
  return [...COMMANDS].filter(([, command]) => command.readsDatabase === false).map(([name]) => name);
}

/** Every command's usage, for `plantstore --help`. */
function fullUsage(): string {
  const lines = [...COMMANDS.values()].map((command) => command.usage).join('\n');
  const database = `Every command but ${withoutDatabase().join(' and ')} reads DATABASE_URL (default ${DEFAULT_DATABASE_URL}).`;
  return `Usage: plantstore <command>\n\nCommands:\n${lines}\n\n${database} ${EVERY_SETTING}\n'plantstore <command> --help' shows one command's usage.\n`;
}

/** One command's usage, for `plantstore <command> --help`. */
function commandUsage(name: string, command: Command): string {
  const database =
    command.readsDatabase === false
      ? `${name} opens no database: DATABASE_URL is not used.`
      : `${name} reads DATABASE_URL (default ${DEFAULT_DATABASE_URL}).`;
  return `Usage:\n${command.usage}\n\n${database} ${EVERY_SETTING}\n`;
}

/** The options (`--name`) a usage text lists: what an unknown option is compared with. */
function optionsIn(usage: string): string[] {
  return usage.match(/--[a-z][a-z-]*/g) ?? [];
}

/** `--help` among the arguments, before a `--` that ends the options. */
function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((arg) => HELP_FLAGS.has(arg));
}

/** The command named first in `argv`, when there is one; what `--help` is then asked of on a usage error. */
let recognised: string | undefined;

async function main(argv: string[]): Promise<void> {
  const [first, ...args] = argv;
  if (first === undefined || HELP_FLAGS.has(first) || (first === 'help' && args.length === 0)) {
    process.stdout.write(fullUsage());
    return;
  }
  if (first === 'help') {
    const [asked] = args;
    const command = COMMANDS.get(asked as string);
    if (command === undefined || args.length > 1) throw new UsageError(`help takes one command name, got ${JSON.stringify(args.join(' '))}`);
    process.stdout.write(commandUsage(asked as string, command));
    return;
  }
  const name = first === '--version' ? 'version' : first;
  const command = COMMANDS.get(name);
  if (command === undefined) throw new UsageError(`unknown command ${JSON.stringify(name)}`);
  recognised = name;
  if (asksForHelp(args)) {
    process.stdout.write(commandUsage(name, command));
    return;
  }
  let config: Config | undefined;
  await command.run(args, { config: () => (config ??= loadConfig(process.env)) });
}

/** How long a failed command may take to end by itself, once its reason is printed, before it is ended. */
const FAILED_EXIT_GRACE_MS = 1000;

main(process.argv.slice(2)).catch((error: unknown) => {
  const usage = recognised === undefined ? undefined : COMMANDS.get(recognised)?.usage;
  const failure = commandFailure(error, recognised, optionsIn(usage ?? ''));
  process.stderr.write(failure.text);
  process.exitCode = failure.exitCode;
  // A failed command ends now. Whatever it opened is closed on the way out (startServer closes storage when it cannot
  // listen), so this only matters should some handle still be open: a failed `serve` that lingered would look alive
  // to a supervisor while serving nothing. Unreferenced, it never delays an exit that happens by itself.
  setTimeout(() => process.exit(), FAILED_EXIT_GRACE_MS).unref();
});
