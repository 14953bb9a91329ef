import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { ServiceUnavailableError } from '../../errors.js';
import { INT64_MAX, INT64_MIN } from '../../int64.js';
import {
  DuplicateTokenNameError,
  type CreateOutcome,
  type PlantQuery,
  type PlantToCreate,
  type Store,
  type StoredPlant,
  type StoredToken,
  type TokenInfo,
} from '../store.js';
import { UNAVAILABLE_CODES, openConnection } from './connection.js';
import { migrate } from './migrations.js';
import type { RowFailure, WriterOperation, WriterOutcome, WriterResponse } from './writer.js';

interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}

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
 * table to drop it: a cost per commit that grows with the cache. Measured on 5M random-id rows, 25-row commits:
 * 64 MiB spent 56 µs of CPU per row in SQLite, 16 MiB 21 µs (8 MiB the same, 32 MiB 32 µs); the extra page reads
 * a smaller cache causes come from the OS page cache and cost less than the scan.
 */
const WRITER_CACHE_MIB = 16;
const READER_CACHE_MIB = 16;
const CHECKPOINT_INTERVAL_MS = 250;

function asError(failure: RowFailure): Error {
  return Object.assign(new Error(failure.message), { code: failure.code });
}

function translate(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.test(code)) {
    return Object.assign(new ServiceUnavailableError('storage is unavailable; retry shortly'), { cause: error });
  }
  return error;
}

function toPlant(row: PlantRow): StoredPlant {
  return { id: row.id, name: row.name, tag: row.tag };
}

/**
 * SQLite in WAL mode with synchronous=FULL. Writes go to a writer thread with its own connection, so a commit's
 * fsync blocks that thread while the event loop goes on parsing the next batch; reads use a connection on the
 * main thread, which WAL lets run beside the writer.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  readonly #reader: Database.Database;
  readonly #writer: Worker;
  readonly #checkpointer: Worker;
  /**
   * Settle when each thread has exited, whenever that happens. They are listened for from the start: a thread that
   * stops emits 'exit' in the same callback that delivers its last message, before an await on that message
   * resumes, so a listener attached after the answer to 'close' would miss it and wait forever.
   */
  readonly #checkpointerExited: Promise<unknown>;
  readonly #writerExited: Promise<unknown>;
  readonly #statements;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void }>();
  #seq = 0;
  #writerGone: Error | undefined;

  private constructor(reader: Database.Database, writer: Worker, checkpointer: Worker) {
    this.#reader = reader;
    this.#writer = writer;
    this.#checkpointer = checkpointer;
    this.#checkpointerExited = once(checkpointer, 'exit').catch(() => undefined);
    this.#writerExited = once(writer, 'exit').catch(() => undefined);
    this.#statements = {
      getPlant: reader.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?').safeIntegers(true),
      listAll: reader
        .prepare<[bigint, number], PlantRow>('SELECT id, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT ?')
        .safeIntegers(true),
      listByTag: reader
        .prepare<[string, bigint, number], PlantRow>('SELECT id, name, tag FROM plants WHERE tag = ? AND id >= ? ORDER BY id LIMIT ?')
        .safeIntegers(true),
      listTokens: reader.prepare<[], TokenInfoRow>('SELECT name, created_at, last_used_at FROM tokens ORDER BY name'),
      findToken: reader.prepare<[Buffer], TokenRow>('SELECT name, hash FROM tokens WHERE hash = ?'),
      allTokens: reader.prepare<[], TokenRow>('SELECT name, hash FROM tokens'),
    };
    writer.on('message', (response: WriterResponse) => {
      const pending = this.#pending.get(response.seq);
      this.#pending.delete(response.seq);
      if (response.ok) pending?.resolve(response.result);
      else pending?.reject(translate(asError(response.error)));
    });
    const gone = (error: Error) => {
      this.#writerGone = error;
      for (const { reject } of this.#pending.values()) reject(new ServiceUnavailableError('storage writer stopped; retry shortly'));
      this.#pending.clear();
    };
    writer.on('error', gone);
    writer.on('exit', () => gone(new Error('writer thread exited')));
  }

  static open(file: string): SqliteStore {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    let reader: Database.Database | undefined;
    try {
      reader = openConnection(file, READER_CACHE_MIB);
      migrate(reader);
    } catch (error) {
      reader?.close();
      throw translate(error);
    }
    const writer = new Worker(new URL('./writer-thread.js', import.meta.url), {
      workerData: { file, cacheMiB: WRITER_CACHE_MIB },
    });
    const checkpointer = new Worker(new URL('./checkpointer-thread.js', import.meta.url), {
      workerData: { file, intervalMs: CHECKPOINT_INTERVAL_MS },
    });
    return new SqliteStore(reader, writer, checkpointer);
  }

  #write<T>(op: WriterOperation, ...args: unknown[]): Promise<T> {
    if (this.#writerGone) return Promise.reject(new ServiceUnavailableError('storage writer stopped; retry shortly'));
    const seq = (this.#seq += 1);
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(seq, { resolve: resolve as (value: unknown) => void, reject });
      this.#writer.postMessage({ seq, op, args });
    });
  }

  #read<T>(work: () => T): Promise<T> {
    try {
      return Promise.resolve(work());
    } catch (error) {
      return Promise.reject(translate(error));
    }
  }

  async createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]> {
    const outcomes = await this.#write<WriterOutcome[]>('createPlants', plants);
    return outcomes.map((outcome) => (outcome.status === 'failed' ? { status: 'failed', error: asError(outcome.error) } : outcome));
  }

  getPlant(id: bigint): Promise<StoredPlant | undefined> {
    return this.#read(() => {
      const row = this.#statements.getPlant.get(id);
      return row && toPlant(row);
    });
  }

  listPlants(query: PlantQuery): Promise<StoredPlant[]> {
    // "id >= from" keeps the first page the same keyset query as any later one without leaving int64.
    if (query.after === INT64_MAX) return Promise.resolve([]);
    const from = query.after === undefined ? INT64_MIN : query.after + 1n;
    return this.#read(() => {
      const rows =
        query.tag === undefined
          ? this.#statements.listAll.all(from, query.limit)
          : this.#statements.listByTag.all(query.tag, from, query.limit);
      return rows.map(toPlant);
    });
  }

  deletePlant(id: bigint): Promise<boolean> {
    return this.#write('deletePlant', id);
  }

  checkWritable(): Promise<void> {
    return this.#write('heartbeat', Date.now());
  }

  async addToken(name: string, hash: Buffer, createdAt: Date): Promise<void> {
    try {
      await this.#write('addToken', name, hash, createdAt.getTime());
    } catch (error) {
      if ((error as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new DuplicateTokenNameError(name);
      throw error;
    }
  }

  listTokens(): Promise<TokenInfo[]> {
    return this.#read(() =>
      this.#statements.listTokens.all().map((row) => ({
        name: row.name,
        createdAt: new Date(row.created_at),
        lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
      })),
    );
  }

  revokeToken(name: string): Promise<boolean> {
    return this.#write('revokeToken', name);
  }

  findToken(hash: Buffer): Promise<StoredToken | undefined> {
    return this.#read(() => this.#statements.findToken.get(hash));
  }

  allTokens(): Promise<StoredToken[]> {
    return this.#read(() => this.#statements.allTokens.all());
  }

  async recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    await this.#write('recordTokenUse', [...uses].map(([name, at]) => [name, at.getTime()]));
  }

  async close(): Promise<void> {
    this.#checkpointer.postMessage('stop');
    await this.#checkpointerExited;
    if (!this.#writerGone) await this.#write('close');
    await this.#writerExited;
    if (this.#reader.open) this.#reader.close();
  }
}
