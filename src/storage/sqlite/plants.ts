import { type CreateOutcome, type PlantListQuery, type PlantStore } from '../plant-store.js';
import type { Plant } from '../../plant.js';
import { keysetFrom, toPlant, type PlantRow } from '../rows.js';
import { isConstraintViolation, prepare, prepareWrite, transaction, type Connection, type Runners, type ReadRunner, type WriteRunner } from './connection.js';
import type { SqliteChanges } from './changes.js';
import type { SqliteWebhookOutbox } from './webhook-outbox.js';

/**
 * The keyset list queries (`id >= from`), exported so test/storage/query-plans.test.ts checks the plans of these very texts.
 */
export const SQLITE_LIST_QUERIES = {
  listAll: 'SELECT id, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT ?',
  listByTag: 'SELECT id, name, tag FROM plants WHERE tag = ? AND id >= ? ORDER BY id LIMIT ?',
} as const;

const GET_PLANT = 'SELECT id, name, tag FROM plants WHERE id = ?';

/**
 * The plant reads of SQLite, on a read connection: SqlitePlants's, and a worker thread's store's
 * (./delegating-store.ts), which reads the same file on a connection of its own and leaves writes to the main
 * thread. `read` runs each read, retried while another connection holds a lock it needs.
 */
export class SqlitePlantReads implements Pick<PlantStore, 'get' | 'list'> {
  readonly #read: ReadRunner;
  readonly #statements;

  constructor(reader: Connection, read: ReadRunner) {
    this.#read = read;
    this.#statements = {
      getPlant: prepare<[bigint], PlantRow>(reader, GET_PLANT, { bigInts: true }),
      listAll: prepare<[bigint, number], PlantRow>(reader, SQLITE_LIST_QUERIES.listAll, { bigInts: true }),
      listByTag: prepare<[string, bigint, number], PlantRow>(reader, SQLITE_LIST_QUERIES.listByTag, { bigInts: true }),
    };
  }

  get(id: bigint): Promise<Plant | undefined> {
    return this.#read(() => {
      const row = this.#statements.getPlant.get(id);
      return row && toPlant(row);
    });
  }

  list(query: PlantListQuery): Promise<Plant[]> {
    const from = keysetFrom(query.after);
    if (from === undefined) return Promise.resolve([]);
    return this.#read(() => {
      const rows =
        query.tag === undefined
          ? this.#statements.listAll.all(from, query.limit)
          : this.#statements.listByTag.all(query.tag, from, query.limit);
      return rows.map(toPlant);
    });
  }
}

/**
 * The plant sub-store of SQLite: its reads (SqlitePlantReads) on the read connection; writes on the one write
 * connection, each one durable commit that takes the write lock at once or throws SQLITE_BUSY having changed nothing,
 * which the runners retry; a write commits only into the database file still at its path (`runners.write`).
 */
export class SqlitePlants extends SqlitePlantReads implements PlantStore {
  readonly #write: WriteRunner;
  readonly #writer: Connection;
  readonly #statements;
  /** The webhook outbox, on the same write connection: its events are written in create's transaction. */
  readonly #webhooks: Pick<SqliteWebhookOutbox, 'recordEvents'>;
  /** The change log, on the same write connection: each create's and delete's change is written in its transaction. */
  readonly #changes: Pick<SqliteChanges, 'recordCreated' | 'recordDeleted' | 'changesDurable'>;

  /** `writer` is the write connection. */
  constructor(
    reader: Connection,
    writer: Connection,
    webhooks: Pick<SqliteWebhookOutbox, 'recordEvents'>,
    changes: Pick<SqliteChanges, 'recordCreated' | 'recordDeleted' | 'changesDurable'>,
    runners: Runners,
  ) {
    super(reader, runners.read);
    this.#write = runners.write;
    this.#writer = writer;
    this.#webhooks = webhooks;
    this.#changes = changes;
    this.#statements = {
      insertPlant: prepareWrite<[bigint, string, string | null]>(writer, 'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING'),
      // In create's transaction, on the write connection: the row as this transaction sees it.
      storedPlant: prepare<[bigint], PlantRow>(writer, GET_PLANT, { bigInts: true }),
      deletePlant: prepareWrite<[bigint]>(writer, 'DELETE FROM plants WHERE id = ?'),
    };
  }

  async create(plants: readonly Plant[], traceparents?: readonly (string | undefined)[]): Promise<CreateOutcome[]> {
    const { outcomes, through } = await this.#write(() => this.#create(plants, traceparents));
    if (through !== undefined) this.#changes.changesDurable(through);
    return outcomes;
  }

  /** One transaction and one fsync for the whole batch. */
  #create(plants: readonly Plant[], traceparents?: readonly (string | undefined)[]): { outcomes: CreateOutcome[]; through: bigint | undefined } {
    const { insertPlant, storedPlant } = this.#statements;
    return transaction(this.#writer, () => {
      const outcomes = plants.map((plant): CreateOutcome => {
        try {
          if (insertPlant.run(plant.id, plant.name, plant.tag).changes === 1) return { kind: 'created' };
        } catch (error) {
          // A constraint broken by this row alone fails this row alone; anything else fails the batch.
          if (isConstraintViolation(error)) return { kind: 'failed', error: error as Error };
          throw error;
        }
        // A later copy of an id this batch created reads the first copy here, as if it had been stored before.
        return { kind: 'existing', stored: toPlant(storedPlant.get(plant.id) as PlantRow) };
      });
      // The webhook outbox, in this same transaction: committed with the plants, by the same fsync, or not at all.
      this.#webhooks.recordEvents(plants, outcomes, traceparents);
      // The change log too: a plant is in the feed if and only if it was stored.
      const through = this.#changes.recordCreated(plants.filter((_, index) => outcomes[index]?.kind === 'created'), Date.now());
      return { outcomes, through };
    });
  }

  /** The delete and its change in one transaction. */
  async delete(id: bigint): Promise<boolean> {
    const through = await this.#write(() =>
      transaction(this.#writer, () => {
        if (this.#statements.deletePlant.run(id).changes === 0) return undefined;
        return this.#changes.recordDeleted(id, Date.now());
      }),
    );
    if (through !== undefined) this.#changes.changesDurable(through);
    return through !== undefined;
  }
}
