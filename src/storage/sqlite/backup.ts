import fs from 'node:fs';
import path from 'node:path';
import { createPrivateFile, partialPathBeside, publishFile, removeQuietly } from '../atomic-file.js';
import { DatabaseInUseError, UnusableDatabaseFileError } from '../errors.js';
import {
  BUSY_TIMEOUT_MS,
  SQLITE_CODES,
  isBusy,
  openDatabase,
  pragmaValue,
  pragmaValues,
  prepareValue,
  prepareWrite,
  sqliteCode,
  transaction,
  type Connection,
} from './connection.js';
import { SQLITE_SCHEMA_VERSION, expectedSchemaObjects, migrate, schemaObjects } from './migrations.js';
import { prepareDatabaseFiles, prepareDatabaseFolder } from './private-files.js';

/** What a verified database file holds. */
export interface DatabaseFileSummary {
  readonly schemaVersion: number;
  readonly plants: number;
  readonly tokens: number;
}

/** The files SQLite keeps beside a database: a backup must never be written over one of them. */
function sideFiles(database: string): string[] {
  return [database, `${database}-wal`, `${database}-shm`, `${database}-journal`];
}

function isSameFile(a: string, b: string): boolean {
  if (path.resolve(a) === path.resolve(b)) return true;
  try {
    const [first, second] = [fs.statSync(a), fs.statSync(b)];
    return first.dev === second.dev && first.ino === second.ino;
  } catch {
    return false;
  }
}

/** SQLite's word for a file that is not a database, or a damaged one: the operator is told which file and why. */
function unusable(label: string, error: unknown): unknown {
  const code = sqliteCode(error);
  if (code === SQLITE_CODES.NOTADB) return new UnusableDatabaseFileError(`${label} is not a SQLite database`, { cause: error });
  if (code === SQLITE_CODES.CORRUPT) return new UnusableDatabaseFileError(`${label} is damaged: ${(error as Error).message}`, { cause: error });
  return error;
}

/**
 * Checks that `db` is a whole, healthy plantstore database: `PRAGMA integrity_check` finds nothing wrong, its schema
 * version is one plantstore has had, and it holds exactly the tables and indexes the migrations create up to that
 * version. Throws UnusableDatabaseFileError naming the first problem.
 */
function verifyDatabase(db: Connection, label: string): DatabaseFileSummary {
  try {
    const problems = pragmaValues(db, 'integrity_check').map(String);
    if (problems.length !== 1 || problems[0] !== 'ok') {
      throw new UnusableDatabaseFileError(`${label} fails PRAGMA integrity_check: ${problems.slice(0, 3).join('; ')}`);
    }
    const schemaVersion = pragmaValue(db, 'user_version') as number;
    if (schemaVersion === 0) throw new UnusableDatabaseFileError(`${label} is not a plantstore database (it has no plantstore schema version)`);
    if (schemaVersion > SQLITE_SCHEMA_VERSION) {
      throw new UnusableDatabaseFileError(
        `${label} has schema version ${schemaVersion}, newer than this plantstore's (${SQLITE_SCHEMA_VERSION}); use a newer plantstore`,
      );
    }
    const expected = expectedSchemaObjects(schemaVersion);
    const actual = schemaObjects(db);
    const describe = (object: { type: string; name: string }) => `${object.type} ${object.name}`;
    for (const object of expected) {
      const found = actual.find((candidate) => candidate.type === object.type && candidate.name === object.name);
      if (!found) throw new UnusableDatabaseFileError(`${label} lacks the ${describe(object)} of plantstore schema version ${schemaVersion}`);
      if (found.sql !== object.sql || found.tableName !== object.tableName) {
        throw new UnusableDatabaseFileError(`${label}: ${describe(object)} differs from plantstore schema version ${schemaVersion}`);
      }
    }
    const extra = actual.find((candidate) => !expected.some((object) => object.type === candidate.type && object.name === candidate.name));
    if (extra) throw new UnusableDatabaseFileError(`${label} holds a ${describe(extra)} that plantstore schema version ${schemaVersion} does not have`);
    const count = (table: string) => prepareValue<[], number>(db, `SELECT count(*) FROM ${table}`).get() as number;
    return { schemaVersion, plants: count('plants'), tokens: count('tokens') };
  } catch (error) {
    throw unusable(label, error);
  }
}

/**
 * A consistent copy of the live database `database` into `target`, while servers keep serving and writing.
 *
 * VACUUM INTO reads the whole database inside one read transaction: a snapshot holding every transaction committed
 * before it began (in WAL mode, those still in the -wal file too), so every create acknowledged before the backup
 * started is in it. A reader never blocks the writer in WAL mode, so the server's commits go on meanwhile; only its
 * checkpoints cannot pass the snapshot until the copy ends. The online backup API was not used: copied in steps, it
 * starts over whenever another connection writes between two steps, which under steady writes may be forever, and
 * copied in one step it is the same snapshot as this with a less compact result.
 *
 * The copy is written to a partial file beside the target (0600), switched to a self-contained rollback journal
 * (nothing beside it is needed to read it), checked (verifyDatabase), flushed to disk, and only then renamed to
 * `target`, replacing any file there in one step.
 */
export function backupDatabase(database: string, target: string): DatabaseFileSummary {
  if (!fs.existsSync(database)) throw new UnusableDatabaseFileError(`there is no database at ${database}`);
  if (sideFiles(database).some((file) => isSameFile(file, target))) {
    throw new UnusableDatabaseFileError(`${target} is the database itself (or one of its files); choose another name for the backup`);
  }
  const partial = partialPathBeside(target);
  createPrivateFile(partial);
  try {
    // Read-only: the backup never changes the live database, not even by a checkpoint when it closes.
    const source = openDatabase(database, { readOnly: true, timeoutMs: BUSY_TIMEOUT_MS });
    try {
      prepareWrite<[string]>(source, 'VACUUM INTO ?').run(partial);
    } catch (error) {
      throw unusable(`the database ${database}`, error);
    } finally {
      source.close();
    }
    const copy = openDatabase(partial);
    let summary: DatabaseFileSummary;
    try {
      copy.exec('PRAGMA journal_mode = DELETE');
      summary = verifyDatabase(copy, 'the backup just written');
    } finally {
      copy.close();
    }
    publishFile(partial, target);
    return summary;
  } catch (error) {
    removeQuietly(...sideFiles(partial));
    throw error;
  }
}

/**
 * Puts the backup `backup` in place as the database `database`, refusing while any other process has the database
 * open.
 *
 * The backup is verified first (verifyDatabase, read-only), then copied beside the database (VACUUM INTO, so a
 * backup still in WAL mode is read with its -wal) and that copy migrated to the current schema. The database is then
 * opened with locking_mode=EXCLUSIVE and taken with BEGIN EXCLUSIVE, without waiting: every connection to a WAL
 * database holds a shared lock on the file for as long as it is open (a server, idle or not, and any command), so
 * the exclusive lock is refused while one exists, and once held it keeps every other process out, including one that
 * starts meanwhile (it waits for the lock, then sees the restored data). Limits: the lock is a POSIX advisory lock,
 * so processes on other machines sharing the file over a network file system may not see it; and a process that has
 * opened the file without reading it yet holds no lock (plantstore reads at once).
 *
 * Holding the lock, the restore replaces the content of every table in one transaction of the live database: its
 * own WAL makes the replacement atomic (a crash leaves the old content or the new, whole), and there is no stale
 * -wal or -shm to get wrong, because the file is never swapped for another. When the restoring connection closes,
 * being the only one, it checkpoints and removes the -wal. A database file too damaged to open must be moved away
 * (with its -wal and -shm) first; the restore then creates it.
 */
export function restoreDatabase(backup: string, database: string): DatabaseFileSummary {
  if (sideFiles(database).some((file) => isSameFile(file, backup))) {
    throw new UnusableDatabaseFileError(`${backup} is the database itself; name a backup file`);
  }
  if (!fs.existsSync(backup)) throw new UnusableDatabaseFileError(`there is no backup at ${backup}`);
  // The folders private, like every command's (DIRECTORY_MODE, whatever the umask); the database file is made
  // private only once the backup is known good, so that a refused one leaves no new file behind.
  prepareDatabaseFolder(database);
  const copyPath = partialPathBeside(database);
  try {
    const source = openDatabase(backup, { readOnly: true, timeoutMs: BUSY_TIMEOUT_MS });
    try {
      verifyDatabase(source, backup);
      createPrivateFile(copyPath);
      prepareWrite<[string]>(source, 'VACUUM INTO ?').run(copyPath);
    } catch (error) {
      throw unusable(backup, error);
    } finally {
      source.close();
    }
    const copy = openDatabase(copyPath);
    try {
      migrate(copy);
      verifyDatabase(copy, `the copy of ${backup}`);
    } finally {
      copy.close();
    }
    prepareDatabaseFiles(database);
    return replaceContent(database, copyPath);
  } finally {
    removeQuietly(...sideFiles(copyPath));
  }
}

function replaceContent(database: string, replacement: string): DatabaseFileSummary {
  // No busy wait: a lock held elsewhere means the database is in use, which is the answer.
  const live = openDatabase(database, { timeoutMs: 0 });
  try {
    live.exec('PRAGMA locking_mode = EXCLUSIVE');
    try {
      live.exec('BEGIN EXCLUSIVE');
      live.exec('COMMIT');
    } catch (error) {
      if (isBusy(error)) {
        throw new DatabaseInUseError(
          `the database ${database} is in use by another process (a running plantstore server or command); stop it, then restore`,
          { cause: error },
        );
      }
      throw unusable(`the database ${database}`, error);
    }
    try {
      // The exclusive lock stays held from here until close (locking_mode=EXCLUSIVE never releases it).
      live.exec('PRAGMA journal_mode = WAL');
      live.exec('PRAGMA synchronous = FULL');
      migrate(live);
      prepareWrite<[string]>(live, 'ATTACH ? AS restored').run(replacement);
    } catch (error) {
      throw unusable(`the database ${database}`, error);
    }
    if (JSON.stringify(schemaObjects(live, 'restored')) !== JSON.stringify(schemaObjects(live, 'main'))) {
      throw new UnusableDatabaseFileError(`the database ${database} does not have plantstore's current schema; move it away, then restore`);
    }
    const tables = schemaObjects(live, 'restored').filter((object) => object.type === 'table');
    transaction(live, () => {
      for (const { name } of tables) {
        const quoted = `"${name.replaceAll('"', '""')}"`;
        live.exec(`DELETE FROM main.${quoted}; INSERT INTO main.${quoted} SELECT * FROM restored.${quoted};`);
      }
    });
    live.exec('DETACH restored');
    const count = (table: string) => prepareValue<[], number>(live, `SELECT count(*) FROM ${table}`).get() as number;
    return { schemaVersion: SQLITE_SCHEMA_VERSION, plants: count('plants'), tokens: count('tokens') };
  } finally {
    live.close();
  }
}
