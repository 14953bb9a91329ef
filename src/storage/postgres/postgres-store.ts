import type { DatabaseConfig } from '../../config.js';
import type { Store } from '../store.js';

export class PostgresStore {
  static async open(_config: Extract<DatabaseConfig, { kind: 'postgres' }>): Promise<Store> {
    throw new Error('PostgreSQL support is not built yet');
  }
}
