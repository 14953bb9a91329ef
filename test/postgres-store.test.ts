import './helpers/exit-guard.js';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../src/config.js';
import { ServiceUnavailableError } from '../src/errors.js';
import { openStore } from '../src/storage/open.js';
import { translate } from '../src/storage/postgres/postgres-store.js';
import { sharedPostgres, stopPostgres } from './helpers/postgres.js';

/** PostgreSQL-only behaviour of the store that the shared storage contract cannot express. */

after(stopPostgres);

function failure(message: string, code?: string): Error {
  return code === undefined ? new Error(message) : Object.assign(new Error(message), { code });
}

describe('PostgreSQL errors', () => {
  const cases: Array<[string, Error, 'unavailable' | 'as is']> = [
    ['53300 too many connections', failure('sorry, too many clients already', '53300'), 'unavailable'],
    ['57P01 admin shutdown', failure('terminating connection due to administrator command', '57P01'), 'unavailable'],
    ['57014 statement timeout', failure('canceling statement due to statement timeout', '57014'), 'unavailable'],
    ['08006 connection failure', failure('connection failure', '08006'), 'unavailable'],
    ['28P01 password rotated', failure('password authentication failed for user "app"', '28P01'), 'unavailable'],
    ['28000 refused by pg_hba', failure('no pg_hba.conf entry for host', '28000'), 'unavailable'],
    ['3D000 database gone', failure('database "plants" does not exist', '3D000'), 'unavailable'],
    ['ECONNREFUSED', failure('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'), 'unavailable'],
    ['ENOENT on a Unix socket', failure('connect ENOENT /run/postgresql/.s.PGSQL.5432', 'ENOENT'), 'unavailable'],
    ['a lost connection', failure('Connection terminated unexpectedly'), 'unavailable'],
    ['23505 unique violation', failure('duplicate key value violates unique constraint', '23505'), 'as is'],
    ['42P01 undefined table', failure('relation "plants" does not exist', '42P01'), 'as is'],
    ['3D0001, not 3D000', failure('made up', '3D0001'), 'as is'],
    ['an error with no code', failure('something else'), 'as is'],
  ];
  for (const [name, error, expected] of cases) {
    it(`answers ${name} ${expected === 'unavailable' ? 'as unavailable (503), keeping the cause' : 'as it is'}`, () => {
      const translated = translate(error);
      if (expected === 'as is') {
        assert.equal(translated, error);
      } else {
        assert.ok(translated instanceof ServiceUnavailableError, `${name} was not translated`);
        assert.equal(translated.status, 503);
        assert.equal(translated.cause, error);
      }
    });
  }

  it('refuses with ServiceUnavailableError a Unix socket with no server, a wrong password and a missing database', async () => {
    // The embedded server even when TEST_DATABASE_URL is set: its password authentication is known.
    const server = await sharedPostgres();
    const noServer = await fs.mkdtemp(path.join(os.tmpdir(), 'plantstore-no-socket-'));
    try {
      const attempts: Array<[string, string]> = [
        [`postgres://postgres:postgres@${encodeURIComponent(noServer)}/postgres`, 'ENOENT'],
        [server.url().replace('postgres:postgres@', 'postgres:wrong@'), '28P01'],
        [server.url('plantstore_no_such_database'), '3D000'],
      ];
      for (const [url, code] of attempts) {
        await assert.rejects(openStore(loadConfig({ DATABASE_URL: url }).database), (error: unknown) => {
          assert.ok(error instanceof ServiceUnavailableError, `${code}: ${String(error)}`);
          assert.equal((error.cause as { code?: unknown }).code, code);
          return true;
        });
      }
    } finally {
      await fs.rm(noServer, { recursive: true, force: true });
    }
  });
});
