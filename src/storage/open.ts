import type { DatabaseConfig } from '../config.js';
import { SqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

/** Opens the configured store with its schema migrated to the current version. */
export async function openStore(database: DatabaseConfig): Promise<Store> {
  switch (database.kind) {
    case 'sqlite':
      return SqliteStore.open(database.path);
    case 'postgres': {
      // Loaded only when configured, so a SQLite deployment never loads pg.
      const { PostgresStore } = await import('./postgres/postgres-store.js');
      return PostgresStore.open(database);
    }
  }
}
