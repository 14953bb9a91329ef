import { isConstraintViolation, prepare, prepareWrite, transaction, type Connection } from './connection.js';
import { toStoredPlant, type PlantRow } from '../rows.js';
import type { CreateOutcome, PlantToCreate } from '../store.js';
import type { SqliteWebhooks } from './webhooks.js';

/**
 * The plant writes of the SQLite store and its heartbeat, on the one connection that writes (the webhook and token
 * sub-stores prepare their own statements on it). Each method is one durable commit that either takes the write lock
 * at once or throws SQLITE_BUSY having changed nothing (the connection's busy timeout is 0 and transactions begin
 * IMMEDIATE), so the store can retry it later without blocking the event loop.
 */
export class SqliteWriter {
  readonly #db: Connection;
  readonly #statements;
  /** The webhook outbox, on this same connection: its events are written in createPlants' transaction. */
  readonly #webhooks: Pick<SqliteWebhooks, 'recordEvents'>;

  constructor(db: Connection, webhooks: Pick<SqliteWebhooks, 'recordEvents'>) {
    this.#db = db;
    this.#webhooks = webhooks;
    this.#statements = {
      insertPlant: prepareWrite<[bigint, string, string | null]>(db, 'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING'),
      getPlant: prepare<[bigint], PlantRow>(db, 'SELECT id, name, tag FROM plants WHERE id = ?', { bigInts: true }),
      deletePlant: prepareWrite<[bigint]>(db, 'DELETE FROM plants WHERE id = ?'),
      heartbeat: prepareWrite<[number]>(
        db,
        'INSERT INTO plantstore_heartbeat (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at',
      ),
    };
  }

  createPlants(plants: readonly PlantToCreate[]): CreateOutcome[] {
    const { insertPlant, getPlant } = this.#statements;
    return transaction(this.#db, () => {
      const outcomes = plants.map((plant): CreateOutcome => {
        try {
          if (insertPlant.run(plant.id, plant.name, plant.tag).changes === 1) return { status: 'created' };
        } catch (error) {
          // A constraint broken by this row alone fails this row alone; anything else fails the batch.
          if (isConstraintViolation(error)) return { status: 'failed', error: error as Error };
          throw error;
        }
        return { status: 'exists', stored: toStoredPlant(getPlant.get(plant.id) as PlantRow) };
      });
      // The webhook outbox, in this same transaction: committed with the plants, by the same fsync, or not at all.
      this.#webhooks.recordEvents(plants, outcomes);
      return outcomes;
    });
  }

  deletePlant(id: bigint): boolean {
    return this.#statements.deletePlant.run(id).changes > 0;
  }

  /** One durable commit of the heartbeat row. */
  heartbeat(checkedAt: number): void {
    this.#statements.heartbeat.run(checkedAt);
  }

  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
