#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { generateToken, hashToken } from './auth/tokens.js';
import { WEBHOOK_USAGE, webhookCommand } from './cli/webhook-command.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { plantJson } from './plant-json.js';
import { serveUntilSignalled } from './server.js';
import { DuplicateTokenNameError, DuplicateWebhookNameError } from './storage/errors.js';
import { openStore } from './storage/open.js';
import type { Store } from './storage/store.js';

const USAGE = `Usage: plantstore <command>

Commands:
  serve                       run the HTTP service (what npm start runs)
  migrate                     create or upgrade the database schema, then exit
  token create --name NAME    create an API token; prints the token alone on stdout, once
  token list                  list tokens: name, creation time, last use (never the secret)
  token revoke NAME           revoke a token; running servers refuse it within TOKEN_CACHE_MS
  plants list [--tag T] [--limit N]
                              print stored plants in ascending id order, one JSON object per line
                              (exact ids); only those tagged exactly T; the first N (default: all)
${WEBHOOK_USAGE}

Every command reads DATABASE_URL (default sqlite:./data/plantstore.db). See README.md for all settings.
`;

/** How long a failed command may take to end by itself, once its reason is printed, before it is ended. */
const FAILED_EXIT_GRACE_MS = 1000;

/** A mistake in how the command was called: usage goes to stderr, exit code 2. */
class UsageError extends Error {}

const TOKEN_NAME = /^[A-Za-z0-9._-]{1,64}$/;

async function withStore<T>(config: Config, work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(config.database);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

async function tokenCommand(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  switch (action) {
    case 'create': {
      const { values } = parseArgs({ args: rest, options: { name: { type: 'string' } }, strict: true });
      const name = values.name;
      if (!name || !TOKEN_NAME.test(name)) throw new UsageError('token create needs --name NAME (1 to 64 of A-Z a-z 0-9 . _ -)');
      const token = generateToken();
      await withStore(config, (store) => store.addToken(name, hashToken(token), new Date()));
      process.stdout.write(`${token}\n`);
      process.stderr.write(`created token "${name}"; it is shown only this once, store it now\n`);
      return;
    }
    case 'list': {
      parseArgs({ args: rest, options: {}, strict: true });
      const tokens = await withStore(config, (store) => store.listTokens());
      if (tokens.length === 0) process.stderr.write('no tokens; create one with: plantstore token create --name NAME\n');
      for (const token of tokens) {
        process.stdout.write(
          `${token.name}\tcreated ${token.createdAt.toISOString()}\tlast used ${token.lastUsedAt?.toISOString() ?? 'never'}\n`,
        );
      }
      return;
    }
    case 'revoke': {
      const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true, strict: true });
      const [name] = positionals;
      if (!name || positionals.length !== 1) throw new UsageError('token revoke needs exactly one NAME');
      const revoked = await withStore(config, (store) => store.revokeToken(name));
      if (!revoked) {
        process.stderr.write(`no token named "${name}"\n`);
        process.exitCode = 1;
        return;
      }
      process.stderr.write(`revoked token "${name}"\n`);
      return;
    }
    default:
      throw new UsageError(`unknown token command ${JSON.stringify(action ?? '')}`);
  }
}

/** Rows read per keyset query when listing; output streams, so memory stays flat on any table size. */
const LIST_BATCH = 1000;

async function plantsCommand(config: Config, args: string[]): Promise<void> {
  const [action, ...rest] = args;
  if (action !== 'list') throw new UsageError(`unknown plants command ${JSON.stringify(action ?? '')}`);
  const { values } = parseArgs({ args: rest, options: { tag: { type: 'string' }, limit: { type: 'string' } }, strict: true });
  let remaining = Number.POSITIVE_INFINITY;
  if (values.limit !== undefined) {
    if (!/^[1-9][0-9]{0,14}$/.test(values.limit)) throw new UsageError('plants list --limit needs a positive integer');
    remaining = Number(values.limit);
  }
  const tag = values.tag;
  await withStore(config, async (store) => {
    let after: bigint | undefined;
    while (remaining > 0) {
      const limit = Math.min(LIST_BATCH, remaining);
      const rows = await store.listPlants({
        limit,
        ...(after === undefined ? {} : { after }),
        ...(tag === undefined ? {} : { tag }),
      });
      if (rows.length === 0) return;
      const text = rows.map((row) => `${plantJson(row)}\n`).join('');
      // A reader that stops early (`| head`) ends the listing quietly.
      if (!(await writeOut(text))) return;
      remaining -= rows.length;
      after = rows.at(-1)?.id;
      if (rows.length < limit) return;
    }
  });
}

let stdoutClosed = false;

/** Writes to stdout, waiting until it is flushed; resolves false once stdout is closed by its reader. */
function writeOut(text: string): Promise<boolean> {
  if (process.stdout.listenerCount('error') === 0) {
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      stdoutClosed = true;
      if (error.code !== 'EPIPE') {
        process.stderr.write(`plantstore: cannot write output: ${error.message}\n`);
        process.exitCode = 1;
      }
    });
  }
  if (stdoutClosed) return Promise.resolve(false);
  return new Promise((resolve) => {
    process.stdout.write(text, (error) => resolve(!error && !stdoutClosed));
  });
}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return;
  }
  const config = loadConfig(process.env);
  switch (command) {
    case 'serve':
      return serveUntilSignalled(config);
    case 'migrate':
      await withStore(config, async () => undefined);
      process.stderr.write('database schema is up to date\n');
      return;
    case 'token':
      return tokenCommand(config, args);
    case 'plants':
      return plantsCommand(config, args);
    case 'webhook':
      return webhookCommand(config, args, { usage: (message) => new UsageError(message), withStore: (work) => withStore(config, work) });
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`plantstore: ${(error as Error).message}\n\n${USAGE}`);
    process.exitCode = 2;
  } else if (error instanceof ConfigError) {
    process.stderr.write(`plantstore: invalid configuration: ${error.message}\n`);
    process.exitCode = 2;
  } else if (error instanceof DuplicateTokenNameError || error instanceof DuplicateWebhookNameError) {
    process.stderr.write(`plantstore: ${error.message}\n`);
    process.exitCode = 1;
  } else {
    // The operator needs the underlying cause (which file, which server), which an HTTP client never sees.
    const cause = (error as { cause?: { message?: string } }).cause?.message;
    process.stderr.write(`plantstore: ${(error as Error).message ?? String(error)}${cause ? ` (${cause})` : ''}\n`);
    process.exitCode = 1;
  }
  // A failed command ends now. Whatever it opened is closed on the way out (startServer closes storage when it cannot
  // listen), so this only matters should some handle still be open: a failed `serve` that lingered would look alive
  // to a supervisor while serving nothing. Unreferenced, it never delays an exit that happens by itself.
  if (process.exitCode) setTimeout(() => process.exit(), FAILED_EXIT_GRACE_MS).unref();
});
