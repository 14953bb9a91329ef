/** The database section of the configuration: DATABASE_URL (and PG_POOL_SIZE), read by loadConfig (./config.ts). */
import path from 'node:path';
import { ConfigError, integer, read, type Env } from './variables.js';

export type DatabaseConfig =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'postgres'; readonly url: string; readonly poolSize: number };

/** The database when DATABASE_URL is unset: a SQLite file under the folder the process starts in. */
export const DEFAULT_DATABASE_URL = 'sqlite:./data/plantstore.db';

export function database(env: Env, cwd: string): DatabaseConfig {
  const raw = read(env, 'DATABASE_URL')?.trim() || DEFAULT_DATABASE_URL;
  if (raw.startsWith('postgres://') || raw.startsWith('postgresql://')) {
    try {
      new URL(raw);
    } catch {
      throw new ConfigError('DATABASE_URL', 'is not a valid postgres:// URL');
    }
    return { kind: 'postgres', url: raw, poolSize: integer(env, 'PG_POOL_SIZE', 10, 1, 1000) };
  }
  if (raw.startsWith('sqlite:')) {
    // sqlite:./relative, sqlite:/absolute and sqlite:///absolute all name a file.
    const file = raw.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '' || file === ':memory:') {
      throw new ConfigError('DATABASE_URL', 'must name a SQLite file (an in-memory database is not durable)');
    }
    return { kind: 'sqlite', path: path.resolve(cwd, file) };
  }
  throw new ConfigError('DATABASE_URL', `must start with sqlite:, postgres:// or postgresql://, got ${JSON.stringify(raw.split(':')[0])}`);
}
