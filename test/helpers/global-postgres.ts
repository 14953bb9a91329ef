import { TestPostgres } from './postgres.js';

/**
 * The run's one embedded PostgreSQL server, for `node --test --test-global-setup=dist/test/helpers/global-postgres.js`
 * (test/run.ts passes it): started once before the first test file, its URL handed to every file's process in
 * TEST_POSTGRES_URL (the runner starts each file with its own environment), stopped after the last. Each test makes
 * its own database on it (helpers/postgres.ts createDatabase), so files share the server and nothing else, and may
 * run at the same time. (A server per file meant an initdb and a start in each of 26 files.)
 *
 * With TEST_DATABASE_URL set the tests make their databases there and no server is started here.
 */
let server: TestPostgres | undefined;

export async function globalSetup(): Promise<void> {
  if (process.env.TEST_DATABASE_URL?.trim()) return;
  server = await TestPostgres.start();
  process.env.TEST_POSTGRES_URL = server.url();
}

export async function globalTeardown(): Promise<void> {
  delete process.env.TEST_POSTGRES_URL;
  await server?.stop();
  server = undefined;
}
