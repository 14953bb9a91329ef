import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { AtomicFileWriter } from './atomic-file.js';
import { SCOPES, UnknownScopeError, parseScopes, type Scope } from './auth/scopes.js';
import { generateToken, hashToken } from './auth/tokens.js';
import { WEBHOOK_USAGE, webhookCommand } from './cli/webhook-command.js';
import { ConfigError, MAX_DURATION_MS, loadConfig, parseDuration, type Config, type DatabaseConfig } from './config.js';
import { newPlantReader } from './http/new-plant.js';
import { plantJson } from './plant-json.js';
import { serveUntilSignalled } from './server.js';
import { DatabaseInUseError, DuplicateTokenNameError, DuplicateWebhookNameError, UnusableDatabaseFileError } from './storage/errors.js';
import { openStore } from './storage/open.js';
import { backupDatabase, restoreDatabase } from './storage/sqlite/backup.js';
import type { Store } from './storage/store.js';
import { TargetHoldsOtherDataError, copyDatabase } from './transfer/copy.js';
import { exportPlants } from './transfer/export.js';
import { ImportStoppedError, importPlants, type ImportCounts } from './transfer/import.js';
import { readLines } from './transfer/lines.js';

const USAGE = `Usage: plantstore <command>

Commands:
  serve                       run the HTTP service (what npm start runs)
  migrate                     create or upgrade the database schema, then exit
  token create --name NAME [--scope SCOPE]... [--read-only] [--expires-in DURATION]
                              create an API token; prints the token alone on stdout, once. SCOPE is
                              plants:read, plants:create or plants:delete, repeated or comma-separated
                              (default: all three); --read-only is --scope plants:read; DURATION such
                              as 30m, 12h or 90d, from 1m to 366d (default: it never expires)
  token list                  list tokens: name, creation time, last use, scopes, expiry (never the
                              secret); expired tokens are listed until revoked
  token revoke NAME           revoke a token; running servers refuse it within TOKEN_CACHE_MS
  plants list [--tag T] [--limit N]
                              print stored plants in ascending id order, one JSON object per line
                              (exact ids); only those tagged exactly T; the first N (default: all)
  backup FILE                 write a consistent copy of the SQLite database to FILE while servers keep
                              running (PostgreSQL: use pg_dump)
  restore FILE                replace the SQLite database with the backup FILE, after checking it;
                              refused while a server or another command has the database open
  export [--out FILE] [--tag T]
                              print every plant (only those tagged T) as JSON lines in id order; with
                              --out, write them to FILE, which appears only once complete
  import [FILE] [--dry-run]   store the NewPlant JSON lines of FILE (default: standard input), each
                              validated as POST /plants validates a body; identical plants are skipped,
                              invalid and conflicting lines reported; --dry-run checks, writes nothing
  copy --to URL               copy plants, tokens and webhook subscriptions from DATABASE_URL into the
                              database at URL (e.g. SQLite to PostgreSQL), then compare both sides; safe
                              to run again
${WEBHOOK_USAGE}

Every command reads DATABASE_URL (default sqlite:./data/plantstore.db). See README.md for all settings.
`;

/** How long a failed command may take to end by itself, once its reason is printed, before it is ended. */
const FAILED_EXIT_GRACE_MS = 1000;

/** A mistake in how the command was called: usage goes to stderr, exit code 2. */
class UsageError extends Error {}

/** A command this database cannot do, and what to use instead: exit code 2, without the usage text. */
class WrongDatabaseError extends Error {}

const TOKEN_NAME = /^[A-Za-z0-9._-]{1,64}$/;
/** The shortest --expires-in: a token that expires sooner could not even be handed over. */
const MIN_TOKEN_LIFETIME_MS = 60_000;

/** The scopes `token create` was asked for: every scope unless some are named. */
function tokenScopes(lists: string[] | undefined, readOnly: boolean): Scope[] {
  if (readOnly && lists !== undefined) throw new UsageError('token create takes --read-only or --scope, not both (--read-only is --scope plants:read)');
  if (readOnly) return ['plants:read'];
  if (lists === undefined) return [...SCOPES];
  try {
    return parseScopes(lists);
  } catch (error) {
    if (error instanceof UnknownScopeError) throw new UsageError(`token create --scope: ${error.message}`);
    throw error;
  }
}

/** When a token made at `from` expires: in whole seconds, rounded up, so that what `token list` prints is what is stored. */
function tokenExpiry(duration: string, from: Date): Date {
  const ms = parseDuration(duration);
  if (ms === undefined || ms < MIN_TOKEN_LIFETIME_MS || ms > MAX_DURATION_MS) {
    throw new UsageError(`token create --expires-in takes a duration from 1m to 366d such as 30m, 12h or 90d, got ${JSON.stringify(duration)}`);
  }
  return new Date(Math.ceil((from.getTime() + ms) / 1000) * 1000);
}

/** A time as token commands print it: ISO 8601 in UTC, without milliseconds when there are none. */
function tokenTime(date: Date): string {
  return date.toISOString().replace(/\.000Z$/, 'Z');
}

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
      const { values } = parseArgs({
        args: rest,
        options: { name: { type: 'string' }, scope: { type: 'string', multiple: true }, 'read-only': { type: 'boolean' }, 'expires-in': { type: 'string' } },
        strict: true,
      });
      const name = values.name;
      if (!name || !TOKEN_NAME.test(name)) throw new UsageError('token create needs --name NAME (1 to 64 of A-Z a-z 0-9 . _ -)');
      const scopes = tokenScopes(values.scope, values['read-only'] === true);
      const createdAt = new Date();
      const expiresAt = values['expires-in'] === undefined ? null : tokenExpiry(values['expires-in'], createdAt);
      const token = generateToken();
      await withStore(config, (store) => store.tokens.add({ name, hash: hashToken(token), scopes, createdAt, expiresAt }));
      // The token alone on stdout, so that TOKEN=$(plantstore token create ...) keeps working; the rest is for the operator.
      process.stdout.write(`${token}\n`);
      process.stderr.write(
        `created token "${name}" with scopes ${scopes.join(',')}, ${expiresAt ? `expiring ${tokenTime(expiresAt)}` : 'never expiring'}; ` +
          'it is shown only this once, store it now\n',
      );
      return;
    }
    case 'list': {
      parseArgs({ args: rest, options: {}, strict: true });
      const tokens = await withStore(config, (store) => store.tokens.list());
      if (tokens.length === 0) process.stderr.write('no tokens; create one with: plantstore token create --name NAME\n');
      const now = Date.now();
      for (const token of tokens) {
        const { expiresAt } = token;
        // Comma-separated, as --scope takes them, so a column never holds a space.
        const scopes = token.scopes.length === 0 ? 'none' : token.scopes.join(',');
        const expiry = expiresAt === null ? 'expires never' : `${expiresAt.getTime() <= now ? 'expired' : 'expires'} ${tokenTime(expiresAt)}`;
        process.stdout.write(
          `${token.name}\tcreated ${token.createdAt.toISOString()}\tlast used ${token.lastUsedAt?.toISOString() ?? 'never'}\tscopes ${scopes}\t${expiry}\n`,
        );
      }
      return;
    }
    case 'revoke': {
      const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true, strict: true });
      const [name] = positionals;
      if (!name || positionals.length !== 1) throw new UsageError('token revoke needs exactly one NAME');
      const revoked = await withStore(config, (store) => store.tokens.revoke(name));
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
      const rows = await store.plants.list({
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
let stdoutWatched = false;

/** Writes to stdout, waiting until it is flushed; resolves false once stdout is closed by its reader. */
function writeOut(text: string): Promise<boolean> {
  // A flag, not a count of 'error' listeners: the SQLite checkpointer thread's stdout is piped into process.stdout,
  // and the pipe's own listener, which rethrows once it has unpiped, would otherwise stand in for this one.
  if (!stdoutWatched) {
    stdoutWatched = true;
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

/** A database as the operator knows it, for messages: a PostgreSQL URL without its password. */
function describeDatabase(database: DatabaseConfig): string {
  if (database.kind === 'sqlite') return `SQLite ${database.path}`;
  const url = new URL(database.url);
  if (url.password !== '') url.password = '***';
  return `PostgreSQL ${url.toString()}`;
}

function sqlitePathFor(config: Config, command: string): string {
  if (config.database.kind === 'sqlite') return config.database.path;
  throw new WrongDatabaseError(
    `${command} works on a SQLite database, and DATABASE_URL is PostgreSQL, whose own tools do this consistently while it serves: ` +
      'pg_dump --format=custom --file=FILE "$DATABASE_URL" to back up, pg_restore --clean --if-exists --dbname="$DATABASE_URL" FILE to restore',
  );
}

function oneFile(args: string[], command: string): string {
  const { positionals } = parseArgs({ args, options: {}, allowPositionals: true, strict: true });
  const [file] = positionals;
  if (file === undefined || file === '' || positionals.length !== 1) throw new UsageError(`${command} needs exactly one FILE`);
  return path.resolve(file);
}

function backupCommand(config: Config, args: string[]): void {
  const file = oneFile(args, 'backup');
  const database = sqlitePathFor(config, 'backup');
  const summary = backupDatabase(database, file);
  process.stderr.write(
    `backed up ${database} to ${file}: ${summary.plants} plants, ${summary.tokens} tokens, schema version ${summary.schemaVersion}; integrity check ok\n`,
  );
}

function restoreCommand(config: Config, args: string[]): void {
  const file = oneFile(args, 'restore');
  const database = sqlitePathFor(config, 'restore');
  const summary = restoreDatabase(file, database);
  process.stderr.write(
    `restored ${file} into ${database}: ${summary.plants} plants, ${summary.tokens} tokens; ` +
      'tokens revoked since the backup was taken are valid again: revoke them again\n',
  );
}

async function exportCommand(config: Config, args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { out: { type: 'string' }, tag: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new UsageError('export takes no FILE argument; use --out FILE');
  if (values.out === '') throw new UsageError('export --out needs a FILE');
  const tag = values.tag;
  const options = tag === undefined ? {} : { tag };
  await withStore(config, async (store) => {
    if (values.out === undefined) {
      await exportPlants(store.plants, { ...options, write: writeOut });
      return;
    }
    const file = path.resolve(values.out);
    const output = await AtomicFileWriter.open(file);
    let written: number;
    try {
      written = await exportPlants(store.plants, {
        ...options,
        write: async (text) => {
          await output.write(text);
          return true;
        },
      });
      await output.commit();
    } catch (error) {
      await output.abort();
      throw error;
    }
    process.stderr.write(`exported ${written} plants to ${file}\n`);
  });
}

/**
 * One status line on stderr, redrawn in place, when stderr is a terminal; elsewhere (a file, a pipe, a log) nothing
 * but whole lines. Redrawn at most every INTERVAL_MS.
 */
class ProgressLine {
  static readonly INTERVAL_MS = 250;
  readonly #enabled = process.stderr.isTTY === true;
  #shown = false;
  #lastDrawn = 0;

  update(text: string): void {
    if (!this.#enabled || performance.now() - this.#lastDrawn < ProgressLine.INTERVAL_MS) return;
    this.#lastDrawn = performance.now();
    this.#shown = true;
    process.stderr.write(`\r${text}\x1b[K`);
  }

  /** A whole line, above the status line. */
  line(text: string): void {
    this.clear();
    process.stderr.write(`${text}\n`);
  }

  clear(): void {
    if (!this.#shown) return;
    this.#shown = false;
    this.#lastDrawn = 0;
    process.stderr.write('\r\x1b[K');
  }
}

function importSummary(counts: Readonly<ImportCounts>, dryRun: boolean): string {
  return (
    `${counts.lines} lines: ${counts.created} ${dryRun ? 'to create' : 'created'}, ${counts.identical} identical (skipped), ` +
    `${counts.conflicting} conflicting, ${counts.invalid} invalid, ${counts.blank} blank (skipped)`
  );
}

async function importCommand(config: Config, args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { 'dry-run': { type: 'boolean' } }, allowPositionals: true, strict: true });
  if (positionals.length > 1) throw new UsageError('import reads one FILE (or standard input)');
  const [file] = positionals;
  const dryRun = values['dry-run'] === true;
  const fromStdin = file === undefined || file === '-';
  const input = fromStdin ? process.stdin : fs.createReadStream(file);
  if (fromStdin && process.stdin.isTTY) process.stderr.write('reading NewPlant JSON lines from the terminal; end with Ctrl-D\n');
  const progress = new ProgressLine();
  const label = dryRun ? 'import --dry-run' : 'import';
  await withStore(config, async (store) => {
    let counts: ImportCounts;
    try {
      counts = await importPlants({
        store: store.plants,
        lines: readLines(input, config.limits.bodyBytes),
        readPlant: newPlantReader(config.limits),
        maxLineBytes: config.limits.bodyBytes,
        batchSize: config.writes.batchLimit,
        dryRun,
        onProblem: (line, reason) => progress.line(`line ${line}: ${reason}`),
        onProgress: (current) => progress.update(`${label}: ${importSummary(current, dryRun)}`),
      });
    } finally {
      progress.clear();
    }
    process.stderr.write(`${label}: ${importSummary(counts, dryRun)}${dryRun ? '; nothing was written' : ''}\n`);
    if (counts.conflicting + counts.invalid > 0) process.exitCode = 1;
  });
}

function sameDatabase(a: DatabaseConfig, b: DatabaseConfig): boolean {
  if (a.kind === 'sqlite' && b.kind === 'sqlite') {
    const real = (file: string) => {
      try {
        return fs.realpathSync(file);
      } catch {
        return file;
      }
    };
    return real(a.path) === real(b.path);
  }
  return a.kind === 'postgres' && b.kind === 'postgres' && a.url === b.url;
}

async function copyCommand(config: Config, args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { to: { type: 'string' } }, allowPositionals: true, strict: true });
  if (positionals.length > 0 || !values.to) throw new UsageError('copy needs --to URL (sqlite:FILE or postgres://…), and nothing else');
  let target: DatabaseConfig;
  try {
    // The target is read as DATABASE_URL would be, with the same rules and messages.
    target = loadConfig({ ...process.env, DATABASE_URL: values.to }).database;
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(`copy --to: ${error.message.replace(/^DATABASE_URL: /, '')}`);
    throw error;
  }
  if (sameDatabase(config.database, target)) throw new UsageError('copy --to names the database DATABASE_URL names; copy into another one');
  process.stderr.write(`copy: from ${describeDatabase(config.database)} to ${describeDatabase(target)}\n`);
  const progress = new ProgressLine();
  await withStore(config, async (source) => {
    // Opening the target creates or upgrades its schema to this plantstore's, as every command does.
    const destination = await openStore(target);
    try {
      const report = await (async () => {
        try {
          return await copyDatabase(source, destination, {
            batchSize: config.writes.batchLimit,
            onProgress: (section, created) => progress.update(`copy: ${created} ${section} created`),
          });
        } finally {
          progress.clear();
        }
      })();
      for (const section of report.sections) {
        const { name, created, source: ours, target: theirs } = section;
        const sides = ours.equals(theirs)
          ? `${ours.count} on both sides, checksum ${ours.checksum} on both`
          : `source ${ours.count} (checksum ${ours.checksum}), target ${theirs.count} (checksum ${theirs.checksum})`;
        process.stderr.write(`copy: ${name}: ${created} created; ${sides}\n`);
      }
      if (report.verified) {
        process.stderr.write('copy: verified: the target holds exactly what the source holds\n');
      } else {
        process.stderr.write(
          'copy: NOT verified: the two sides differ, so the source changed while the copy ran; stop writes to it and run the same copy again\n',
        );
        process.exitCode = 1;
      }
    } finally {
      await destination.close();
    }
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
    case 'backup':
      return backupCommand(config, args);
    case 'restore':
      return restoreCommand(config, args);
    case 'export':
      return exportCommand(config, args);
    case 'import':
      return importCommand(config, args);
    case 'copy':
      return copyCommand(config, args);
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
  } else if (error instanceof WrongDatabaseError) {
    process.stderr.write(`plantstore: ${error.message}\n`);
    process.exitCode = 2;
  } else if (
    error instanceof DuplicateTokenNameError ||
    error instanceof DuplicateWebhookNameError ||
    error instanceof UnusableDatabaseFileError ||
    error instanceof DatabaseInUseError ||
    error instanceof TargetHoldsOtherDataError ||
    error instanceof ImportStoppedError
  ) {
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
