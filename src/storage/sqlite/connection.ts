import { DatabaseSync, type SQLInputValue, type SQLOutputValue, type StatementSync } from 'node:sqlite';
import { unavailableIf, type StorageErrorKind } from '../errors.js';

/**
 * The SQLite driver is Node's own node:sqlite: nothing to compile, download or load besides Node itself. What it
 * does differently from other drivers (transactions, pragmas, scalar reads, int64 reads, BLOBs, error codes) is
 * handled here, once, so the rest of the store reads as plain SQL.
 */
export type Connection = DatabaseSync;
export type { SQLInputValue, SQLOutputValue };

/** How long a write waits for another connection's lock (a CLI command, another process) before SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;

/**
 * Runs one read, retrying while another connection holds a lock it needs: the store's retry on a timer
 * (SqliteStore), which its sub-stores run every read through.
 */
export type ReadRunner = <T>(work: () => T) => Promise<T>;

/**
 * Runs one write that is a single commit, retried as a read is, and made only while the database file at the path is
 * the one open; it resolves only if the file still is once committed, and once a WAL sync that began after the commit
 * has returned (SqliteStore's #write): a commit into a removed or replaced file would be lost, and one not yet synced
 * is not durable. Only a store that checks the file's identity hands one out.
 */
export type WriteRunner = <T>(work: () => T) => Promise<T>;

/** How a sub-store runs its work (SqliteStore's): reads, and writes, which commit only into the database file still at its path. */
export interface Runners {
  readonly read: ReadRunner;
  readonly write: WriteRunner;
}

export interface ConnectionOptions {
  /** Opens the file read-only; a file that does not exist is then an error rather than created. */
  readonly readOnly?: boolean;
  /** How long a statement waits for another connection's lock before SQLITE_BUSY; 0 answers at once. */
  readonly timeoutMs?: number;
}

/** A connection to `file` (created if missing, unless read-only), with no settings of this service's applied. */
export function openDatabase(file: string, options: ConnectionOptions = {}): Connection {
  return new DatabaseSync(file, { readOnly: options.readOnly ?? false, timeout: options.timeoutMs ?? 0 });
}

/**
 * One connection with this service's settings: WAL, and synchronous=FULL so a commit returns only after the
 * WAL is fsync'd; the store's write connection lowers it to NORMAL and syncs the WAL off the event loop instead
 * (SqliteStore, WalSync). `cacheMiB` is this connection's page cache: random-id inserts touch pages all over the
 * primary key, and a cache that holds them saves a read per insert. Opening waits up to BUSY_TIMEOUT_MS for
 * another connection's lock; the server's connections then wait 0 and retry on a timer instead (SqliteStore).
 */
export function openConnection(file: string, cacheMiB: number): Connection {
  const db = openDatabase(file, { timeoutMs: BUSY_TIMEOUT_MS });
  try {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = FULL');
    db.exec(`PRAGMA cache_size = -${cacheMiB * 1024}`);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** The value a pragma reads (its first column of its first row), e.g. `pragmaValue(db, 'user_version')`. */
export function pragmaValue(db: Connection, pragma: string): SQLOutputValue | undefined {
  const row = db.prepare(`PRAGMA ${pragma}`).get();
  return row === undefined ? undefined : Object.values(row)[0];
}

/** Every row a pragma reads, one value (its first column) each, e.g. `pragmaValues(db, 'integrity_check')`. */
export function pragmaValues(db: Connection, pragma: string): SQLOutputValue[] {
  return db.prepare(`PRAGMA ${pragma}`).all().map((row) => Object.values(row)[0] as SQLOutputValue);
}

/**
 * A prepared statement for reading, typed by its parameters and rows. It is the driver's own statement, only typed:
 * no wrapper runs per call. Parameters are positional (`?`) or one object of named ones (`@name` in SQL, `{ name }`
 * here). A statement run for its effect comes from prepareWrite instead.
 */
export interface Statement<Params extends unknown[] = SQLInputValue[], Row = Record<string, SQLOutputValue>> {
  get(...params: Params): Row | undefined;
  all(...params: Params): Row[];
}

/**
 * Prepares `sql` for reading. With `bigInts`, every INTEGER it reads comes back as a bigint, exact over the whole
 * int64 range; without, as a number, and a value past 2^53 throws (ERR_OUT_OF_RANGE) rather than being rounded.
 */
export function prepare<Params extends unknown[] = SQLInputValue[], Row = Record<string, SQLOutputValue>>(
  db: Connection,
  sql: string,
  options: { readonly bigInts?: boolean } = {},
): Statement<Params, Row> {
  const statement = db.prepare(sql);
  if (options.bigInts) statement.setReadBigInts(true);
  return statement as unknown as Statement<Params, Row>;
}

/** A prepared statement run for its effect: `run` answers how many rows it changed. */
export interface WriteStatement<Params extends unknown[] = SQLInputValue[]> {
  run(...params: Params): { readonly changes: number };
}

/**
 * Prepares `sql` to be run for its effect (INSERT, UPDATE, DELETE, BEGIN, a PRAGMA that sets). Its result carries
 * the connection's last inserted rowid, which after a plant id past 2^53 no JavaScript number holds: read as a
 * number, Node 26 throws ERR_OUT_OF_RANGE from run() even after the statement has done its work (Node 24 rounds it).
 * So it is read as a bigint, and only the count of changed rows, never above 2^53, is handed on.
 */
export function prepareWrite<Params extends unknown[] = SQLInputValue[]>(db: Connection, sql: string): WriteStatement<Params> {
  const statement = db.prepare(sql);
  statement.setReadBigInts(true);
  return { run: (...params) => ({ changes: Number(statement.run(...(params as SQLInputValue[])).changes) }) };
}

/** A statement read for its first column alone: `get` answers that value of the first row, `all` that of each row. */
export interface ValueStatement<Params extends unknown[], Value> {
  get(...params: Params): Value | undefined;
  all(...params: Params): Value[];
}

/** Prepares `sql` for its first column's value (`SELECT count(*) …`); `bigInts` as in prepare. */
export function prepareValue<Params extends unknown[] = SQLInputValue[], Value = SQLOutputValue>(
  db: Connection,
  sql: string,
  options: { readonly bigInts?: boolean } = {},
): ValueStatement<Params, Value> {
  const statement: StatementSync = db.prepare(sql);
  if (options.bigInts) statement.setReadBigInts(true);
  statement.setReturnArrays(true);
  return {
    get: (...params) => (statement.get(...(params as SQLInputValue[])) as unknown as Value[] | undefined)?.[0],
    all: (...params) => (statement.all(...(params as SQLInputValue[])) as unknown as Value[][]).map((row) => row[0] as Value),
  };
}

/** The statements that open and close a transaction, prepared once per connection. */
const transactionStatements = new WeakMap<Connection, { begin: WriteStatement<[]>; commit: WriteStatement<[]>; rollback: WriteStatement<[]> }>();

/**
 * Runs `work` in one transaction begun IMMEDIATE (the write lock taken first, so the transaction either starts with
 * it or fails with SQLITE_BUSY having done nothing) and commits it; if `work` or the commit throws, rolls back
 * (unless SQLite already has) and rethrows.
 */
export function transaction<T>(db: Connection, work: () => T): T {
  let statements = transactionStatements.get(db);
  if (statements === undefined) {
    statements = { begin: prepareWrite(db, 'BEGIN IMMEDIATE'), commit: prepareWrite(db, 'COMMIT'), rollback: prepareWrite(db, 'ROLLBACK') };
    transactionStatements.set(db, statements);
  }
  try {
    statements.begin.run();
    const result = work();
    statements.commit.run();
    return result;
  } catch (error) {
    // Whatever threw, BEGIN included: a transaction left open would keep the write lock from every other connection.
    if (db.isTransaction) statements.rollback.run();
    throw error;
  }
}

/** A BLOB as read (a Uint8Array) as the Buffer the rest of the service uses, sharing its memory. */
export function blobToBuffer(blob: Uint8Array): Buffer {
  return Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
}

/** SQLite's primary result codes this service tells apart (https://sqlite.org/rescode.html). */
export const SQLITE_CODES = {
  BUSY: 5,
  LOCKED: 6,
  NOMEM: 7,
  READONLY: 8,
  IOERR: 10,
  CORRUPT: 11,
  FULL: 13,
  CANTOPEN: 14,
  PROTOCOL: 15,
  CONSTRAINT: 19,
  NOTADB: 26,
} as const;

/** The extended result codes this service tells apart: which constraint a statement would break. */
export const SQLITE_EXTENDED_CODES = {
  CONSTRAINT_PRIMARYKEY: SQLITE_CODES.CONSTRAINT | (6 << 8),
  CONSTRAINT_UNIQUE: SQLITE_CODES.CONSTRAINT | (8 << 8),
} as const;

/**
 * The primary result code of a SQLite error, undefined for any other error. node:sqlite throws errors with
 * `code: 'ERR_SQLITE_ERROR'` and the extended result code in `errcode`, whose low byte is the primary code
 * (SQLITE_BUSY_SNAPSHOT is SQLITE_BUSY | 2 << 8).
 */
export function sqliteCode(error: unknown): number | undefined {
  const errcode = sqliteExtendedCode(error);
  return errcode === undefined ? undefined : errcode & 0xff;
}

/** The extended result code of a SQLite error (SQLITE_CONSTRAINT_UNIQUE, …), undefined for any other error. */
export function sqliteExtendedCode(error: unknown): number | undefined {
  const errcode = (error as { errcode?: unknown } | null | undefined)?.errcode;
  return typeof errcode === 'number' ? errcode : undefined;
}

/** The kind of each primary code meaning "not now" rather than a bug. */
const UNAVAILABLE_KINDS: ReadonlyMap<number, StorageErrorKind> = new Map([
  [SQLITE_CODES.BUSY, 'locked'],
  [SQLITE_CODES.LOCKED, 'locked'],
  [SQLITE_CODES.FULL, 'disk_full'],
  [SQLITE_CODES.READONLY, 'read_only'],
  [SQLITE_CODES.NOMEM, 'resources'],
  [SQLITE_CODES.IOERR, 'io'],
  [SQLITE_CODES.CANTOPEN, 'io'],
  [SQLITE_CODES.PROTOCOL, 'io'],
  [SQLITE_CODES.CORRUPT, 'io'],
  [SQLITE_CODES.NOTADB, 'io'],
]);

/** The kind of a SQLite error meaning "not now" (disk full, locked, read-only, I/O); undefined for anything else. */
export function unavailableKind(error: unknown): StorageErrorKind | undefined {
  const code = sqliteCode(error);
  return code === undefined ? undefined : UNAVAILABLE_KINDS.get(code);
}

/** SQLITE_BUSY (any extended code): another connection holds the lock. */
export function isBusy(error: unknown): boolean {
  return sqliteCode(error) === SQLITE_CODES.BUSY;
}

/** SQLITE_CONSTRAINT (any extended code): the statement would break a constraint, and changed nothing. */
export function isConstraintViolation(error: unknown): boolean {
  return sqliteCode(error) === SQLITE_CODES.CONSTRAINT;
}

/** A SQLite error meaning "not now" (disk full, locked, read-only, I/O) as a StorageUnavailableError; any other as it is. */
export function translateSqliteError(error: unknown): unknown {
  return unavailableIf(error, (cause) => unavailableKind(cause) !== undefined);
}
