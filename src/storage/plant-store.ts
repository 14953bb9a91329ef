/**
 * The plant sub-store (`Store.plants`): create a batch, get, list by keyset, delete. The write queue and the plant
 * service use it, and export, import and copy. Each database implements it in one module (src/storage/sqlite/plants.ts,
 * src/storage/postgres/plants.ts); test/storage-contract.test.ts holds the two to the same rules.
 */
export interface StoredPlant {
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}

export type PlantToCreate = StoredPlant;

export interface PlantQuery {
  readonly limit: number;
  readonly after?: bigint;
  readonly tag?: string;
}

export type CreateOutcome =
  | { readonly status: 'created' }
  | { readonly status: 'exists'; readonly stored: StoredPlant }
  /** This row alone could not be stored; the rest of its batch is unaffected. */
  | { readonly status: 'failed'; readonly error: Error };

export interface PlantStore {
  /**
   * Stores new plants, each committed durably before the promise resolves. SQLite commits the call as one
   * transaction; PostgreSQL as one insert statement, plus a read of ids already stored and a retry for any deleted
   * in between, each committing on its own. The promise rejects only when nothing was stored; a failure after some
   * rows committed fails the rest row by row. A repeated id is created once and its later copies are answered as
   * the first left it. An id already stored is left as it is and reported with its stored content.
   */
  create(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]>;
  get(id: bigint): Promise<StoredPlant | undefined>;
  /** Plants in ascending id order, strictly after `after` when given (keyset paging), only with `tag` when given. */
  list(query: PlantQuery): Promise<StoredPlant[]>;
  /** Resolves false when no plant has that id; committed durably before it resolves. */
  delete(id: bigint): Promise<boolean>;
}
