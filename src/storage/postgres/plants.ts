import type pg from 'pg';
import { StorageUnavailableError } from '../errors.js';
import { type CreateOutcome, type PlantListQuery, type PlantStore } from '../plant-store.js';
import type { Plant } from '../../plant.js';
import { keysetFrom, toPlant, type PlantRow } from '../rows.js';
import type { Query } from './connection.js';

/**
 * Inserts what is new in one autocommit statement and returns the ids it inserted. Rows go in ascending id order, so
 * two batches sharing ids (from this replica or another) wait on each other in one direction only and never
 * deadlock. It is a named (prepared) statement, parsed and planned once per connection: cheaper per row than an
 * unnamed one, and than a single statement that also read back the rows already there (a CTE joined to plants);
 * the figures are in docs/benchmarks.md ("Figures other pages rest on").
 */
const INSERT_PLANTS: pg.QueryConfig = {
  name: 'plantstore_insert_plants',
  // The webhook outbox is written by the same statement, so by the same transaction and commit: one event per plant
  // it inserted and subscription active then. With no subscription the join is empty and costs next to nothing.
  // The change log too, numbered from the counter row, which is updated after the plants are in (it is the lock that
  // orders every change writer's commit, so it is held for as short a time as the statement allows).
  text: `WITH inserted AS (
      INSERT INTO plants (id, name, tag)
      SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) AS t(id, name, tag) ORDER BY id
      ON CONFLICT (id) DO NOTHING
      RETURNING id, name, tag
    ), events AS (
      INSERT INTO webhook_events (subscription_id, plant_id, name, tag, created_at, next_attempt_at, traceparent)
      SELECT s.id, i.id, i.name, i.tag, now(), now(), p.traceparent
      FROM inserted i
      LEFT JOIN unnest($1::bigint[], $4::text[]) AS p(id, traceparent) ON p.id = i.id
      CROSS JOIN webhook_subscriptions s WHERE s.disabled_at IS NULL
    ), counter AS (
      UPDATE plant_change_counter SET last = last + (SELECT count(*) FROM inserted)
      WHERE id = 1 AND EXISTS (SELECT 1 FROM inserted)
      RETURNING last
    ), changes AS (
      INSERT INTO plant_changes (seq, kind, plant_id, name, tag, changed_at)
      SELECT c.last - (SELECT count(*) FROM inserted) + row_number() OVER (ORDER BY i.id), 'created', i.id, i.name, i.tag, now()
      FROM inserted i CROSS JOIN counter c
    )
    SELECT id FROM inserted`,
};

/**
 * A delete and its change in one autocommit statement; the counter row is taken last and only when a row was
 * deleted, as by INSERT_PLANTS (src/storage/postgres/migrations.ts says why the sequence comes from it).
 */
const DELETE_PLANT: pg.QueryConfig = {
  name: 'plantstore_delete_plant',
  text: `WITH deleted AS (
      DELETE FROM plants WHERE id = $1 RETURNING id
    ), counter AS (
      UPDATE plant_change_counter SET last = last + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM deleted) RETURNING last
    ), changes AS (
      INSERT INTO plant_changes (seq, kind, plant_id, changed_at) SELECT c.last, 'deleted', d.id, now() FROM deleted d CROSS JOIN counter c
    )
    SELECT id FROM deleted`,
};

/** The keyset list queries (`id >= $1`), exported so test/storage/query-plans.test.ts checks the plans of these very texts. */
export const POSTGRES_LIST_QUERIES = {
  listAll: 'SELECT id, name, tag FROM plants WHERE id >= $1 ORDER BY id LIMIT $2',
  listByTag: 'SELECT id, name, tag FROM plants WHERE tag = $3 AND id >= $1 ORDER BY id LIMIT $2',
} as const;

/** The stored rows of ids the insert stood back from: replays or conflicts, told apart by the caller. */
const READ_PLANTS = 'SELECT id, name, tag FROM plants WHERE id = ANY($1::bigint[])';

/**
 * Insert attempts per create call at most. A second is needed only for an id whose stored row was deleted between
 * the insert and the read; more, only if that race repeats on the same id.
 */
const CREATE_ATTEMPTS = 3;

/**
 * The first copy of each id, in input order. The write queue passes a turn's creates as they came, repeats
 * included; a repeat must not be reported created twice: like SQLite, later copies are answered as the first one left them.
 */
function firstCopies(plants: readonly Plant[]): Map<bigint, { readonly index: number; readonly plant: Plant }> {
  const first = new Map<bigint, { index: number; plant: Plant }>();
  plants.forEach((plant, index) => {
    if (!first.has(plant.id)) first.set(plant.id, { index, plant });
  });
  return first;
}

/**
 * The plant sub-store of PostgreSQL. Uniqueness, replays and conflicts are decided by the database, so they hold
 * across any number of replicas; every statement goes through the store's pool and its error translation.
 */
export class PostgresPlants implements PlantStore {
  readonly #query: Query;

  constructor(query: Query) {
    this.#query = query;
  }

  async create(plants: readonly Plant[], traceparents?: readonly (string | undefined)[]): Promise<CreateOutcome[]> {
    if (plants.length === 0) return [];
    const first = firstCopies(plants);
    /** Per id: created by this call, or the plant found stored in its place. */
    const found = new Map<bigint, 'created' | Plant>();
    let pending = [...first.values()].map((copy) => copy.plant);
    /** Each plant's traceparent (src/tracing/), by id: stored with its webhook events. */
    const traceparentOf = new Map<bigint, string | null>();
    if (traceparents) for (const { index, plant } of first.values()) traceparentOf.set(plant.id, traceparents[index] ?? null);
    let cutShort: unknown;
    try {
      for (let attempt = 0; attempt < CREATE_ATTEMPTS && pending.length > 0; attempt += 1) {
        // One autocommit statement, one round trip. synchronous_commit is on for every connection (poolConfig), and
        // pg resolves only at ReadyForQuery, which the server sends after the implicit commit is flushed.
        const inserted = await this.#query<{ id: bigint }>(INSERT_PLANTS, [
          pending.map((plant) => plant.id.toString()),
          pending.map((plant) => plant.name),
          pending.map((plant) => plant.tag),
          pending.map((plant) => traceparentOf.get(plant.id) ?? null),
        ]);
        for (const row of inserted.rows) found.set(row.id, 'created');
        const others = pending.filter((plant) => !found.has(plant.id));
        if (others.length === 0) break;
        // A second round trip only when some ids were already there: their stored content decides replay or conflict.
        const stored = await this.#query<PlantRow>(READ_PLANTS, [others.map((plant) => plant.id.toString())]);
        for (const row of stored.rows) found.set(row.id, toPlant(row));
        // Neither inserted nor found: the row that stood in the way was deleted between the two statements, so the
        // next attempt inserts ours.
        pending = others.filter((plant) => !found.has(plant.id));
      }
    } catch (error) {
      // Nothing answered yet: the batch is refused as a whole. Otherwise rows already committed keep their answer
      // (created now, rather than refused and retried by the client into a replay), and only the rest fail with this error.
      if (found.size === 0) throw error;
      cutShort = error;
    }
    const unanswered = cutShort ?? new StorageUnavailableError('the plant changed concurrently; retry');
    return plants.map((plant, index): CreateOutcome => {
      const stored = found.get(plant.id);
      if (stored === undefined) return { kind: 'failed', error: unanswered as Error };
      if (stored !== 'created') return { kind: 'existing', stored };
      // A later copy of an id this call created is answered as if the first copy had been stored before it.
      const firstCopy = first.get(plant.id) as { readonly index: number; readonly plant: Plant };
      return firstCopy.index === index ? { kind: 'created' } : { kind: 'existing', stored: toPlant(firstCopy.plant) };
    });
  }

  async get(id: bigint): Promise<Plant | undefined> {
    const result = await this.#query<PlantRow>('SELECT id, name, tag FROM plants WHERE id = $1', [id.toString()]);
    const row = result.rows[0];
    return row && toPlant(row);
  }

  async list(query: PlantListQuery): Promise<Plant[]> {
    const from = keysetFrom(query.after)?.toString();
    if (from === undefined) return [];
    const result =
      query.tag === undefined
        ? await this.#query<PlantRow>(POSTGRES_LIST_QUERIES.listAll, [from, query.limit])
        : await this.#query<PlantRow>(POSTGRES_LIST_QUERIES.listByTag, [from, query.limit, query.tag]);
    return result.rows.map(toPlant);
  }

  async delete(id: bigint): Promise<boolean> {
    return ((await this.#query(DELETE_PLANT, [id.toString()])).rowCount ?? 0) > 0;
  }
}
