import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { StorageUnavailableError, unavailableIf } from '../errors.js';
import { insertTokenOnce, keysetFrom, toStoredPlant, type PlantRow } from '../rows.js';
import type {
  CreateOutcome,
  PlantQuery,
  PlantToCreate,
  Store,
  StoredPlant,
  StoredToken,
  TokenImportOutcome,
  TokenInfo,
  TokenRecord,
} from '../store.js';
import { BUSY_TIMEOUT_MS, UNAVAILABLE_CODES, openConnection } from './connection.js';
import { migrate } from './migrations.js';
import { SqliteWriter, toTokenRecord, type TokenRecordRow } from './writer.js';

interface TokenRow {
  name: string;
  hash: Buffer;
}

interface TokenInfoRow {
  name: string;
  created_at: number;
  last_used_at: number | null;
}

/**
 * Deliberately small. Every page split (random ids split leaves all the time) leaves a temporary page number
 * past the end of the database in SQLite's page cache, and the next commit then scans the cache's whole hash
 * table to drop it: a cost per commit that grows with the cache, more than the extra page reads a smaller cache
 * causes (they come from the OS page cache). The sizes measured are in BENCHMARKS.md ("Random ids at 5 million rows").
 */
const WRITER_CACHE_MIB = 16;
const READER_CACHE_MIB = 16;
const CHECKPOINT_INTERVAL_MS = 250;

/** A readiness check should answer promptly, so its heartbeat waits for another connection's lock only this long. */
const HEARTBEAT_LOCK_WAIT_MS = 1000;
/** Retries for a lock held elsewhere start 1 ms apart and back off to this. */
const LOCK_RETRY_MAX_MS = 25;

/** The keyset list queries (`id >= from`), exported so test/indexes.test.ts checks the plans of these very texts. */
export const SQLITE_LIST_QUERIES = {
  listAll: 'SELECT id, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT ?',
  listByTag: 'SELECT id, name, tag FROM plants WHERE tag = ? AND id >= ? ORDER BY id LIMIT ?',
} as const;

function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && UNAVAILABLE_CODES.test(code);
}

function translate(error: unknown): unknown {
  return unavailableIf(error, isUnavailable);
}

function isBusy(error: unknown): boolean {
  return String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY');
}

/**
 * SQLite in WAL mode with synchronous=FULL. Every write runs on the event loop, on one connection: a batch of
 * creates is one transaction and one fsync, and the loop waits for that fsync. That wait is cheaper than any
 * hand-off: requests arriving meanwhile queue in the kernel and make the next batch bigger, while a writer thread
 * sharing the core cost more in thread switches and message passing than the fsync it hid (measured in
 * BENCHMARKS.md). A lock held by another process must not block the loop, so the write connection never waits
 * for a lock itself (busy timeout 0): a write that finds the lock taken is retried on a timer, up to the busy
 * timeout. Reads use a second connection, which WAL does not make wait for a writer; in the rare cases where a read
 * meets a lock (another connection rebuilding the WAL index after a process crashed mid-write) it is retried the same
 * way. Checkpoints run on a thread of their own (checkpointer-thread.ts), never inside a commit.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  /** One writer: SQLite commits one transaction at a time. */
  readonly writeConcurrency = 1;
  readonly #reader: Database.Database;
  readonly #writer: SqliteWriter;
  readonly #checkpointer: Worker;
  /**
   * Settles when the checkpointer has exited. It is listened for from the start: a thread that stops emits 'exit'
   * in the same callback that delivers its last message, so a listener attached later could miss it.
   */
  readonly #checkpointerExited: Promise<unknown>;
  readonly #statements;
  #closed = false;

  private constructor(reader: Database.Database, writer: SqliteWriter, checkpointer: Worker) {
    this.#reader = reader;
    this.#writer = writer;
    this.#checkpointer = checkpointer;
    this.#checkpointerExited = once(checkpointer, 'exit').catch(() => undefined);
    this.#statements = {
      getPlant: reader.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?').safeIntegers(true),
      listAll: reader.prepare<[bigint, number], PlantRow>(SQLITE_LIST_QUERIES.listAll).safeIntegers(true),
      listByTag: reader.prepare<[string, bigint, number], PlantRow>(SQLITE_LIST_QUERIES.listByTag).safeIntegers(true),
      listTokens: reader.prepare<[], TokenInfoRow>('SELECT name, created_at, last_used_at FROM tokens ORDER BY name'),
      findToken: reader.prepare<[Buffer], TokenRow>('SELECT name, hash FROM tokens WHERE hash = ?'),
      allTokens: reader.prepare<[], TokenRow>('SELECT name, hash FROM tokens'),
      // SQLite compares text bytewise (BINARY): the order PostgreSQL gives with COLLATE "C".
      exportTokens: reader.prepare<[], TokenRecordRow>('SELECT name, hash, created_at, last_used_at FROM tokens ORDER BY name'),
    };
  }

  static open(file: string): SqliteStore {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    let reader: Database.Database | undefined;
    let writer: Database.Database | undefined;
    let checkpointer: Worker | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      migrate(reader);
      writer = openConnection(file, WRITER_CACHE_MIB);
      // Opening and migrating may wait for another process (one migrating too); serving, no statement waits for a
      // lock on the event loop: #unlocked retries on a timer instead.
      for (const connection of [reader, writer]) connection.pragma('busy_timeout = 0');
      // Checkpoints run on their own thread, never inside a commit.
      writer.pragma('wal_autocheckpoint = 0');
      const sqliteWriter = new SqliteWriter(writer);
      checkpointer = new Worker(new URL('./checkpointer-thread.js', import.meta.url), {
        workerData: { file, intervalMs: CHECKPOINT_INTERVAL_MS },
      });
      return new SqliteStore(reader, sqliteWriter, checkpointer);
    } catch (error) {
      void checkpointer?.terminate();
      writer?.close();
      reader?.close();
      throw translate(error);
    }
  }

  /**
   * Runs `work` (one read, or one write that is a single durable commit) now or, while another connection holds a
   * lock it needs, again after a short wait, until `lockWaitMs` has passed; the event loop serves other requests
   * meanwhile. Neither connection ever waits for a lock itself (busy timeout 0), since that wait would block the loop.
   */
  async #unlocked<T>(work: () => T, lockWaitMs = BUSY_TIMEOUT_MS): Promise<T> {
    const deadline = performance.now() + lockWaitMs;
    for (let delay = 1; ; delay = Math.min(delay * 2, LOCK_RETRY_MAX_MS)) {
      if (this.#closed) throw new StorageUnavailableError('storage is closed');
      try {
        return work();
      } catch (error) {
        if (!isBusy(error) || performance.now() + delay > deadline) throw translate(error);
      }
      await sleep(delay);
    }
  }

  createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]> {
    return this.#unlocked(() => this.#writer.createPlants(plants));
  }

  getPlant(id: bigint): Promise<StoredPlant | undefined> {
    return this.#unlocked(() => {
      const row = this.#statements.getPlant.get(id);
      return row && toStoredPlant(row);
    });
  }

  listPlants(query: PlantQuery): Promise<StoredPlant[]> {
    const from = keysetFrom(query.after);
    if (from === undefined) return Promise.resolve([]);
    return this.#unlocked(() => {
      const rows =
        query.tag === undefined
          ? this.#statements.listAll.all(from, query.limit)
          : this.#statements.listByTag.all(query.tag, from, query.limit);
      return rows.map(toStoredPlant);
    });
  }

  deletePlant(id: bigint): Promise<boolean> {
    return this.#unlocked(() => this.#writer.deletePlant(id));
  }

  checkWritable(): Promise<void> {
    return this.#unlocked(() => this.#writer.heartbeat(Date.now()), HEARTBEAT_LOCK_WAIT_MS);
  }

  addToken(name: string, hash: Buffer, createdAt: Date): Promise<void> {
    return insertTokenOnce(
      name,
      () => this.#unlocked(() => this.#writer.addToken(name, hash, createdAt.getTime())),
      // The name is the primary key; a clash of hashes (never in practice) is not a naming mistake.
      (error) => (error as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY',
    );
  }

  listTokens(): Promise<TokenInfo[]> {
    return this.#unlocked(() =>
      this.#statements.listTokens.all().map((row) => ({
        name: row.name,
        createdAt: new Date(row.created_at),
        lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
      })),
    );
  }

  revokeToken(name: string): Promise<boolean> {
    return this.#unlocked(() => this.#writer.revokeToken(name));
  }

  findToken(hash: Buffer): Promise<StoredToken | undefined> {
    return this.#unlocked(() => this.#statements.findToken.get(hash));
  }

  allTokens(): Promise<StoredToken[]> {
    return this.#unlocked(() => this.#statements.allTokens.all());
  }

  async recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    const entries = [...uses].map(([name, at]) => [name, at.getTime()] as const);
    await this.#unlocked(() => this.#writer.recordTokenUse(entries));
  }

  exportTokens(): Promise<TokenRecord[]> {
    return this.#unlocked(() => this.#statements.exportTokens.all().map(toTokenRecord));
  }

  importTokens(tokens: readonly TokenRecord[]): Promise<TokenImportOutcome[]> {
    return this.#unlocked(() => this.#writer.importTokens(tokens));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#checkpointer.postMessage('stop');
    await this.#checkpointerExited;
    this.#writer.close();
    if (this.#reader.open) this.#reader.close();
  }
}
