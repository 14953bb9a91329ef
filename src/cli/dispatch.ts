/**
 * `plantstore <command> [arguments]`, in this process: finds the command, answers `--help` and `--version`, runs it,
 * and turns whatever it throws into a line on stderr and an exit code (exit-codes.ts). The launcher
 * (launcher.ts) imports this module, or runs it as the script of a child Node with a bounded heap.
 */
import { DEFAULT_DATABASE_URL, loadConfig, type Config } from '../config/config.js';
import type { Command } from './command.js';
import { UsageError } from './errors.js';
import { commandFailure } from './exit-codes.js';

/**
 * In the order the usage text lists them, each loaded only when run or asked for its usage: a command loads what it
 * needs and nothing more (`token list` no HTTP framework, `push` no database driver), so a command starts in a
 * fraction of the time loading all of them took.
 */
const COMMANDS: ReadonlyMap<string, () => Promise<Command>> = new Map<string, () => Promise<Command>>([
  ['serve', () => import('./commands/serve.js')],
  ['migrate', () => import('./commands/migrate.js')],
  ['token', () => import('./commands/token.js')],
  ['plants', () => import('./commands/plants.js')],
  ['backup', () => import('./commands/backup.js')],
  ['restore', () => import('./commands/restore.js')],
  ['export', () => import('./commands/export.js')],
  ['import', () => import('./commands/import.js')],
  ['push', () => import('./commands/push.js')],
  ['watch', () => import('./commands/watch.js')],
  ['copy', () => import('./commands/copy.js')],
  ['webhook', () => import('./commands/webhook.js')],
  ['version', () => import('./commands/version.js')],
]);

const HELP_FLAGS = new Set(['--help', '-h']);

const EVERY_SETTING = 'Every setting: docs/configuration.md (in the package and the repository).';

/** Every command's usage, for `plantstore --help`. */
async function fullUsage(): Promise<string> {
  const commands = await Promise.all([...COMMANDS].map(async ([name, load]) => ({ name, command: await load() })));
  const lines = commands.map(({ command }) => command.usage).join('\n');
  const withoutDatabase = commands.filter(({ command }) => command.readsDatabase === false).map(({ name }) => name);
  const named = withoutDatabase.length > 1 ? `${withoutDatabase.slice(0, -1).join(', ')} and ${withoutDatabase.at(-1)}` : withoutDatabase.join('');
  const database = `Every command but ${named} reads DATABASE_URL (default ${DEFAULT_DATABASE_URL}).`;
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
/** Its usage text, once loaded: the options an unknown option is compared with. */
let recognisedUsage = '';

async function main(argv: string[]): Promise<void> {
  const [first, ...args] = argv;
  if (first === undefined || HELP_FLAGS.has(first) || (first === 'help' && args.length === 0)) {
    process.stdout.write(await fullUsage());
    return;
  }
  if (first === 'help') {
    const [asked] = args;
    const load = COMMANDS.get(asked as string);
    if (load === undefined || args.length > 1) throw new UsageError(`help takes one command name, got ${JSON.stringify(args.join(' '))}`);
    process.stdout.write(commandUsage(asked as string, await load()));
    return;
  }
  const name = first === '--version' ? 'version' : first;
  const load = COMMANDS.get(name);
  if (load === undefined) throw new UsageError(`unknown command ${JSON.stringify(name)}`);
  recognised = name;
  const command = await load();
  recognisedUsage = command.usage;
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
  const failure = commandFailure(error, recognised, optionsIn(recognisedUsage));
  process.stderr.write(failure.text);
  process.exitCode = failure.exitCode;
  // A failed command ends now. Whatever it opened is closed on the way out (startServer closes storage when it cannot
  // listen), so this only matters should some handle still be open: a failed `serve` that lingered would look alive
  // to a supervisor while serving nothing. Unreferenced, it never delays an exit that happens by itself.
  setTimeout(() => process.exit(), FAILED_EXIT_GRACE_MS).unref();
});
