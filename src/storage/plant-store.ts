/**
 * The plant sub-store (`Store.plants`): create a batch, get, list by keyset, delete. The write queue and the plant
 * service use it, and export, import and copy. Each database implements it in one module (src/storage/sqlite/plants.ts,
 * src/storage/postgres/plants.ts); test/storage/storage-contract.test.ts holds the two to the same rules.
 */

import type { Plant } from '../plant.js';

/** One keyset page of plants: ascending id order, strictly after `after` when given, only with `tag` when given. */
export interface PlantListQuery {
  /** Plants per page, already validated by the caller. */
  readonly limit: number;
  /** Only plants whose id is greater (the keyset cursor). */
  readonly after?: bigint;
  /** Only plants whose tag is exactly this. */
  readonly tag?: string;
}

/** What creating one plant of a batch did. */
export type CreateOutcome =
  | { readonly kind: 'created' }
  /**
   * Its id was stored already: the stored plant was left as it is. Whether that answers the create as a replay (a
   * client's retry) or a conflict is the domain's rule (src/plants/replay.ts isSamePlant), not storage's.
   */
  | { readonly kind: 'existing'; readonly stored: Plant }
  /** This row alone could not be stored; the rest of its batch is unaffected. */
  | { readonly kind: 'failed'; readonly error: Error };

export interface PlantStore {
  /**
   * Stores new plants, each committed durably before the promise resolves. SQLite commits the call as one
   * transaction; PostgreSQL as one insert statement, plus a read of ids already stored and a retry for any deleted
   * in between, each committing on its own. The promise rejects only when nothing was stored; a failure after some
   * rows committed fails the rest row by row. A repeated id is created once and its later copies are answered as
   * if the first had been stored before. An id already stored is left as it is and answered `existing`,
   * with its stored content. `traceparents`, given, holds per plant the W3C traceparent of the request that created
   * it (or undefined): stored with its webhook events, so each delivery continues that trace (src/tracing/).
   */
  create(plants: readonly Plant[], traceparents?: readonly (string | undefined)[]): Promise<CreateOutcome[]>;
  get(id: bigint): Promise<Plant | undefined>;
  list(query: PlantListQuery): Promise<Plant[]>;
  /** Resolves false when no plant has that id; committed durably before it resolves. */
  delete(id: bigint): Promise<boolean>;
}
