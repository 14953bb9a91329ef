import type Database from 'better-sqlite3';
import type { CreateOutcome, PlantToCreate, StoredPlant } from '../store.js';
import { BUSY_TIMEOUT_MS } from './connection.js';

const HEARTBEAT_LOCK_WAIT_MS = 1000;

interface PlantRow {
  id: bigint;
  name: string;
  tag: string | null;
}

/** A row's own failure, in a form that crosses a thread boundary. */
export interface RowFailure {
  readonly message: string;
  readonly code: string;
}

export type WriterOutcome = Exclude<CreateOutcome, { status: 'failed' }> | { readonly status: 'failed'; readonly error: RowFailure };

/**
 * Every write of the SQLite store, on one connection. It runs in the writer thread (writer-thread.ts), so the
 * commit's fsync blocks that thread and never the event loop that serves HTTP.
 */
export class SqliteWriter {
  readonly #db: Database.Database;
  readonly #statements;
  readonly #createBatch: (plants: readonly PlantToCreate[]) => WriterOutcome[];

  constructor(db: Database.Database) {
    this.#db = db;
    this.#statements = {
      insertPlant: db.prepare<[bigint, string, string | null]>('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING'),
      getPlant: db.prepare<[bigint], PlantRow>('SELECT id, name, tag FROM plants WHERE id = ?').safeIntegers(true),
      deletePlant: db.prepare<[bigint]>('DELETE FROM plants WHERE id = ?'),
      addToken: db.prepare<[string, Buffer, number]>('INSERT INTO tokens (name, hash, created_at) VALUES (?, ?, ?)'),
      revokeToken: db.prepare<[string]>('DELETE FROM tokens WHERE name = ?'),
      heartbeat: db.prepare<[number]>(
        'INSERT INTO plantstore_heartbeat (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at',
      ),
      touchToken: db.prepare<[number, string, number]>(
        'UPDATE tokens SET last_used_at = ? WHERE name = ? AND (last_used_at IS NULL OR last_used_at < ?)',
      ),
    };
    const { insertPlant, getPlant } = this.#statements;
    this.#createBatch = db.transaction((plants: readonly PlantToCreate[]) =>
      plants.map((plant): WriterOutcome => {
        try {
          if (insertPlant.run(plant.id, plant.name, plant.tag).changes === 1) return { status: 'created' };
        } catch (error) {
          // A constraint broken by this row alone fails this row alone; anything else fails the batch.
          const code = String((error as { code?: unknown }).code);
          if (code.startsWith('SQLITE_CONSTRAINT')) return { status: 'failed', error: { message: (error as Error).message, code } };
          throw error;
        }
        const row = getPlant.get(plant.id) as PlantRow;
        const stored: StoredPlant = { id: row.id, name: row.name, tag: row.tag };
        return { status: 'exists', stored };
      }),
    );
  }

  createPlants(plants: readonly PlantToCreate[]): WriterOutcome[] {
    return this.#createBatch(plants);
  }

  deletePlant(id: bigint): boolean {
    return this.#statements.deletePlant.run(id).changes > 0;
  }

  /** Throws SQLITE_CONSTRAINT_PRIMARYKEY when the name is taken. */
  addToken(name: string, hash: Uint8Array, createdAt: number): void {
    this.#statements.addToken.run(name, Buffer.from(hash), createdAt);
  }

  revokeToken(name: string): boolean {
    return this.#statements.revokeToken.run(name).changes > 0;
  }

  recordTokenUse(uses: ReadonlyArray<readonly [string, number]>): void {
    this.#db.transaction(() => {
      for (const [name, at] of uses) this.#statements.touchToken.run(at, name, at);
    })();
  }

  /**
   * One durable commit of the heartbeat row. A readiness check should answer promptly, so it waits for another
   * connection's lock only HEARTBEAT_LOCK_WAIT_MS, not the full busy timeout that creates wait.
   */
  heartbeat(checkedAt: number): void {
    this.#db.pragma(`busy_timeout = ${HEARTBEAT_LOCK_WAIT_MS}`);
    try {
      this.#statements.heartbeat.run(checkedAt);
    } finally {
      this.#db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

export type WriterOperation = 'createPlants' | 'deletePlant' | 'addToken' | 'revokeToken' | 'recordTokenUse' | 'heartbeat' | 'close';

export interface WriterRequest {
  readonly seq: number;
  readonly op: WriterOperation;
  readonly args: unknown[];
}

export type WriterResponse =
  | { readonly seq: number; readonly ok: true; readonly result: unknown }
  | { readonly seq: number; readonly ok: false; readonly error: RowFailure };
