/** What the service stores and reads; rows of either database are mapped to these before they leave storage. */
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

export interface StoredToken {
  readonly name: string;
  /** SHA-256 of the token; the token itself is never stored. */
  readonly hash: Buffer;
}

export interface TokenInfo {
  readonly name: string;
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
}

export class DuplicateTokenNameError extends Error {
  constructor(name: string) {
    super(`a token named ${JSON.stringify(name)} already exists`);
    this.name = 'DuplicateTokenNameError';
  }
}

/** Something storage noticed by itself, outside any request (a background thread died, checkpoints keep failing). */
export interface StorageIncident {
  readonly level: 'error' | 'warn' | 'info';
  readonly message: string;
  readonly error?: Error;
}

/**
 * The storage interface both databases implement; test/storage-contract.test.ts holds them to the same rules.
 * Unavailability of any kind surfaces as ServiceUnavailableError.
 */
export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  /**
   * Stores new plants, each committed durably before the promise resolves. SQLite commits the call as one
   * transaction; PostgreSQL as one insert statement, plus a read of ids already stored and a retry for any deleted
   * in between, each committing on its own. The promise rejects only when nothing was stored; a failure after some
   * rows committed fails the rest row by row. A repeated id is created once and its later copies are answered as
   * the first left it. An id already stored is left as it is and reported with its stored content.
   */
  createPlants(plants: readonly PlantToCreate[]): Promise<CreateOutcome[]>;
  getPlant(id: bigint): Promise<StoredPlant | undefined>;
  /** Plants in ascending id order, strictly after `after` when given (keyset paging), only with `tag` when given. */
  listPlants(query: PlantQuery): Promise<StoredPlant[]>;
  /** Resolves false when no plant has that id. */
  deletePlant(id: bigint): Promise<boolean>;
  /**
   * Resolves once a one-row heartbeat write has been committed durably, proving the store can take writes now (a
   * read alone would pass on a full disk, a locked file or a read-only database); rejects with
   * ServiceUnavailableError otherwise, within a bounded time.
   */
  checkWritable(): Promise<void>;
  addToken(name: string, hash: Buffer, createdAt: Date): Promise<void>;
  listTokens(): Promise<TokenInfo[]>;
  /** Resolves false when no token has that name. */
  revokeToken(name: string): Promise<boolean>;
  findToken(hash: Buffer): Promise<StoredToken | undefined>;
  /** Every token that is currently valid. */
  allTokens(): Promise<StoredToken[]>;
  recordTokenUse(uses: ReadonlyMap<string, Date>): Promise<void>;
  /**
   * Calls `listener` with every incident from now on, and with those that happened before anyone listened; returns
   * the function that stops it. Storage has no logger of its own: the app logs what it hears here.
   */
  onIncident(listener: (incident: StorageIncident) => void): () => void;
  close(): Promise<void>;
}
