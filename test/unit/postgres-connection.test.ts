/**
 * The PostgreSQL pool's options (src/storage/postgres/connection.ts) from the configuration: PG_POOL_SIZE sizes it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { poolConfig } from '../../src/storage/postgres/connection.js';

describe('the PostgreSQL pool', () => {
  const postgresUrl = 'postgres://u:p@db:5432/plants';

  it('sizes the PostgreSQL pool from PG_POOL_SIZE, 10 by default', () => {
    const sizes: Array<[string | undefined, number]> = [
      [undefined, 10],
      ['1', 1],
      ['7', 7],
      ['1000', 1000],
    ];
    for (const [value, size] of sizes) {
      const database = loadConfig({ DATABASE_URL: postgresUrl, ...(value === undefined ? {} : { PG_POOL_SIZE: value }) }).database;
      if (database.kind !== 'postgres') assert.fail(`${postgresUrl} was read as ${database.kind}`);
      assert.equal(database.poolSize, size);
      assert.equal(poolConfig(database).max, size);
    }
  });
});
