import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { ServiceUnavailableError } from '../../errors.js';
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
import { INT64_MAX, INT64_MIN } from '../../int64.js';
import { migrate } from './migrations.js';

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

/** Errors that mean "not now" (disk full, locked, read-only, I/O) rather than a bug: answered 503. */
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL|NOMEM|CORRUPT|NOTADB)/;

function translate(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && UNAVAILABLE.test(code)) {
    return Object.assign(new ServiceUnavailableError('storage is unavailable; retry shortly'), { cause: error });
  }
  return error;
}

function toPlant(row: PlantRow): StoredPlant {
  return { id: row.id, name: row.name, tag: row.tag };
}

/**
 * SQLite in WAL mode with synchronous=FULL: a commit returns only after the WAL is fsync'd. better-sqlite3 is
 * synchronous, so a batch commits within one call and its fsync is shared by every row in it.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  readonly #db: Database.Database;
  readonly #statements;
  readonly #createBatch: (plants: readonly PlantToCreate[]) => CreateOutcome[];

  private constructor(db: Database.Database) {
    this.#db = db;
    this.#statements = {
      insertPlant: db.prepare<[bigint, string, string | null]>('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING'),
      getPlant: db.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?').safeIntegers(true),
      listAll: db.prepare<[bigint, number], PlantRow>('SELECT id, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT ?').safeIntegers(true),
      listByTag: db
        .prepare<[string, bigint, number], PlantRow>('SELECT id, name, tag FROM plants WHERE tag = ? AND id >= ? ORDER BY id LIMIT ?')
        .safeIntegers(true),
      deletePlant: db.prepare<[bigint]>('DELETE FROM plants WHERE id = ?'),
      ping: db.prepare('SELECT 1').pluck(),
      addToken: db.prepare<[string, Buffer, number]>('INSERT INTO tokens (name, hash, created_at) VALUES (?, ?, ?)'),
      listTokens: db.prepare<[], TokenInfoRow>('SELECT name, created_at, last_used_at FROM tokens ORDER BY name'),
      revokeToken: db.prepare<[string]>('DELETE FROM tokens WHERE name = ?'),
      findToken: db.prepare<[Buffer], TokenRow>('SELECT name, hash FROM tokens WHERE hash = ?'),
      allTokens: db.prepare<[], TokenRow>('SELECT name, hash FROM tokens'),
      touchToken: db.prepare<[number, string, number]>(
        'UPDATE tokens SET last_used_at = ? WHERE name = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      ),
    };
    const { insertPlant, getPlant } = this.#statements;
    this.#createBatch = db.transaction((plants: readonly PlantToCreate[]) =>
      plants.map((plant): CreateOutcome => {
        try {
          if (insertPlant.run(plant.id, plant.name, plant.tag).changes === 1) return { status: 'created' };
        } catch (error) {
          // A constraint broken by this row alone fails this row alone; anything else fails the batch.
          if (String((error as { code?: unknown }).code).startsWith('SQLITE_CONSTRAINT')) return { status: 'failed', error: error as Error };
          throw error;
        }
        return { status: 'exists', stored: toPlant(getPlant.get(plant.id) as PlantRow) };
      }),
    );
  }

  static open(file: string): SqliteStore {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    let db: Database.Database | undefined;
    try {
      db = new Database(file, { timeout: 5000 });
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      // Random-id inserts touch pages all over the primary key; a larger cache keeps them in memory.
      db.pragma('cache_size = -65536');
      migrate(db);
      return new SqliteStore(db);
    } catch (error) {
      db?.close();
      throw translate(error);
    }
  }

  #run<T>(work: () => T): Promise<T> {
    try {
      return Promise.resolve(work());
    } catch (error) {
      return Promise.reject(translate(error));
    }
  }

  createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]> {
    return this.#run(() => this.#createBatch(plants));
  }

  getPlant(id: bigint): Promise<StoredPlant | undefined> {
    return this.#run(() => {
      const row = this.#statements.getPlant.get(id);
      return row && toPlant(row);
    });
  }

  listPlants(query: PlantQuery): Promise<StoredPlant[]> {
    // "id >= from" keeps the first page the same keyset query as any later one without leaving int64.
    if (query.after === INT64_MAX) return Promise.resolve([]);
    const from = query.after === undefined ? INT64_MIN : query.after + 1n;
    return this.#run(() => {
      const rows =
        query.tag === undefined
          ? this.#statements.listAll.all(from, query.limit)
          : this.#statements.listByTag.all(query.tag, from, query.limit);
      return rows.map(toPlant);
    });
  }

  deletePlant(id: bigint): Promise<boolean> {
    return this.#run(() => this.#statements.deletePlant.run(id).changes > 0);
  }

  ping(): Promise<void> {
    return this.#run(() => {
      this.#statements.ping.get();
    });
  }

  addToken(name: string, hash: Buffer, createdAt: Date): Promise<void> {
    return this.#run(() => {
      try {
        this.#statements.addToken.run(name, hash, createdAt.getTime());
      } catch (error) {
        if ((error as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new DuplicateTokenNameError(name);
        throw error;
      }
    });
  }

  listTokens(): Promise<TokenInfo[]> {
    return this.#run(() =>
      this.#statements.listTokens.all().map((row) => ({
        name: row.name,
        createdAt: new Date(row.created_at),
        lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
      })),
    );
  }

  revokeToken(name: string): Promise<boolean> {
    return this.#run(() => this.#statements.revokeToken.run(name).changes > 0);
  }

  findToken(hash: Buffer): Promise<StoredToken | undefined> {
    return this.#run(() => this.#statements.findToken.get(hash));
  }

  allTokens(): Promise<StoredToken[]> {
    return this.#run(() => this.#statements.allTokens.all());
  }

  recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    return this.#run(() => {
      this.#db.transaction(() => {
        for (const [name, at] of uses) this.#statements.touchToken.run(at.getTime(), name, at.getTime());
      })();
    });
  }

  close(): Promise<void> {
    return this.#run(() => {
      if (this.#db.open) this.#db.close();
    });
  }
}
