import fs from 'node:fs';
import path from 'node:path';

/** Owner only, as PostgreSQL keeps its data directory: plants and token hashes are nobody else's business. */
const DIRECTORY_MODE = 0o700;
const FILE_MODE = 0o600;
/** Permission bits for anyone but the owner. */
const GROUP_AND_OTHER = 0o077;

/** Files SQLite keeps beside the database in WAL mode. */
const SIDE_FILES = ['-wal', '-shm'];

/**
 * Makes the database private to its owner before SQLite opens it.
 *
 * SQLite creates a new database file 0644 (less the umask), readable by every local user. It creates the -wal and
 * -shm files with the database file's own permission bits, whatever the umask, so creating the database file 0600
 * first is enough for all three, now and whenever SQLite recreates the others later.
 *
 * The folder is created 0700 when missing; one that exists belongs to the operator, who may have opened it on
 * purpose, and keeps its mode. A database, -wal or -shm that exists with group or other permissions (0644, as SQLite
 * leaves a file that another program created) has those removed, and the change is said on stderr, since it changes
 * files the operator can see. Files owned by another user are left alone: their access is that user's arrangement.
 */
export function prepareDatabaseFiles(file: string): void {
  prepareDatabaseFolder(file);
  try {
    fs.closeSync(fs.openSync(file, 'wx', FILE_MODE));
  } catch (error) {
    // Exists already: tightened below. Any other failure (a read-only or full file system, no permission) is left
    // to SQLite's open, which reports it the way the store expects (503-class errors).
    if (errorCode(error) !== 'EEXIST') return;
  }
  for (const existing of [file, ...SIDE_FILES.map((suffix) => file + suffix)]) removeGroupAndOtherAccess(existing);
}

/** Creates the database's folder, and any missing above it, 0700; folders that exist keep their mode. */
export function prepareDatabaseFolder(file: string): void {
  // A umask can only take bits away, so no umask makes these more open than DIRECTORY_MODE and FILE_MODE.
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: DIRECTORY_MODE });
}

function removeGroupAndOtherAccess(file: string): void {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return;
    throw error;
  }
  if ((stat.mode & GROUP_AND_OTHER) === 0 || stat.uid !== process.geteuid?.()) return;
  const mode = stat.mode & 0o7777 & ~GROUP_AND_OTHER;
  try {
    fs.chmodSync(file, mode);
  } catch (error) {
    // A read-only file system (or an immutable file) cannot change; nothing can be written there either, and
    // SQLite's open reports that as it always has.
    if (errorCode(error) === 'EROFS' || errorCode(error) === 'EPERM') return;
    throw error;
  }
  process.stderr.write(
    `plantstore: ${file} was readable by others (mode ${octal(stat.mode)}); made it private to its owner (mode ${octal(mode)})\n`,
  );
}

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

function errorCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}
