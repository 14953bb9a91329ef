import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { UnusableArgumentError, UsageError } from './errors.js';

/** The one FILE argument of `command` (backup, restore), as an absolute path. */
export function oneFile(args: string[], command: string): string {
  const { positionals } = parseArgs({ args, options: {}, allowPositionals: true, strict: true });
  const [file] = positionals;
  if (file === undefined || file === '' || positionals.length !== 1) throw new UsageError(`${command} needs exactly one FILE`);
  return path.resolve(file);
}

/** What went wrong with a file, in words (Node's own message says `ENOENT: no such file or directory, open '…'`). */
function fileProblem(error: unknown): string {
  switch ((error as NodeJS.ErrnoException | null)?.code) {
    case 'ENOENT':
      return 'there is no such file';
    case 'EACCES':
    case 'EPERM':
      return 'this user may not read it';
    case 'EISDIR':
      return 'it is a folder, not a file';
    case 'ENOTDIR':
      return 'a part of its path is a file, not a folder';
    default:
      return (error as Error | null)?.message ?? String(error);
  }
}

/**
 * Opens FILE for reading, so that a file that cannot be read is reported now, naming where it was given (`label`,
 * e.g. "import FILE" or "push --token-file") and what to do (`fix`), before anything else is started.
 */
export function openForReading(file: string, label: string, fix: string): number {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (error) {
    throw new UnusableArgumentError(`${label} ${file}: ${fileProblem(error)}; ${fix}`, { cause: error });
  }
  if (fs.fstatSync(fd).isDirectory()) {
    fs.closeSync(fd);
    throw new UnusableArgumentError(`${label} ${file}: it is a folder, not a file; ${fix}`);
  }
  return fd;
}

/**
 * The endpoint `PATH` of the server in `COMMAND --url URL` and the token in its `--token-file` (with `scope`), both
 * required: what a command that talks to a running server (push, watch) needs before anything else.
 */
export function serverEndpoint(
  values: { readonly url?: string | undefined; readonly 'token-file'?: string | undefined },
  command: string,
  endpoint: string,
  scope: string,
): { readonly url: URL; readonly token: string } {
  if (values.url === undefined) throw new UsageError(`${command} needs --url, the server (e.g. http://127.0.0.1:8080)`);
  if (values['token-file'] === undefined) throw new UsageError(`${command} needs --token-file, a file holding a token with the ${scope} scope`);
  let url: URL;
  try {
    url = new URL(endpoint, values.url);
  } catch {
    throw new UsageError(`--url ${JSON.stringify(values.url)} is not a URL`);
  }
  return { url, token: readTokenFile(values['token-file'], command, scope) };
}

/**
 * The token in `COMMAND --token-file FILE`, refused by name, with how to make one, when the file cannot be read or is
 * empty.
 */
function readTokenFile(file: string, command: string, scope: string): string {
  const fix = `give a file holding a token with the ${scope} scope (plantstore token create --name NAME --scope ${scope} > FILE)`;
  const fd = openForReading(file, `${command} --token-file`, fix);
  try {
    const token = fs.readFileSync(fd, 'utf8').trim();
    if (token === '') throw new UnusableArgumentError(`${command} --token-file ${file}: the file is empty; ${fix}`);
    return token;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Checks that FILE (absolute) can be made where the operator asked: its folder exists and FILE is not a folder.
 * Commands write FILE under a hidden temporary name beside it and rename it into place, so without this check
 * the error would name that temporary file rather than the folder the operator gave.
 */
export function requireFolderFor(file: string, label: string): void {
  const folder = path.dirname(file);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(folder);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' && (error as NodeJS.ErrnoException).code !== 'ENOTDIR') throw error;
    throw new UnusableArgumentError(
      `${label} ${file}: the folder ${folder} does not exist; create it first (mkdir -p '${folder}') or name a file in a folder that exists`,
      { cause: error },
    );
  }
  if (!stat.isDirectory()) throw new UnusableArgumentError(`${label} ${file}: ${folder} is a file, not a folder; name a file in a folder`);
  if (fs.statSync(file, { throwIfNoEntry: false })?.isDirectory()) {
    throw new UnusableArgumentError(`${label} ${file}: it is a folder; name a file inside it`);
  }
}
