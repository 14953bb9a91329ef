/**
 * `plantstore plants list`: a child process on the database a server writes, through the built `bin`. The GET /plants
 * contract it mirrors is tested in-process in test/http/reads.test.ts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { useTestApp } from '../helpers/app.js';
import { idsOf } from '../helpers/assertions.js';
import { DATABASES } from '../helpers/databases.js';
import { deleteAllPlants, INT64_MAX, INT64_MIN, PAST_DOUBLE, plantJson, storedIds } from '../helpers/plants.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { CLI } from '../helpers/process.js';

stopPostgresAfterAll();

const run = promisify(execFile);

for (const database of DATABASES) {
  describe(`plantstore plants list on ${database.kind}`, () => {
    const t = useTestApp(database.create);

    const post = (id: string, name: string, tag?: string) =>
      t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: plantJson(id, name, tag) });

    beforeEach(() => deleteAllPlants(t));

    describe('plantstore plants list (a child process on the same database)', () => {
      let idsBefore: bigint[];
      beforeEach(async () => {
        for (const [id, tag] of [[INT64_MAX, 'x'], [PAST_DOUBLE, 'x'], ['3', 'y'], [INT64_MIN, 'x'], ['4', undefined]] as const) {
          assert.equal((await post(id, `cli ${id}`, tag)).statusCode, 200);
        }
        idsBefore = await storedIds(t);
      });
      afterEach(async () => {
        assert.deepEqual(await storedIds(t), idsBefore, 'listing changes nothing');
      });

      const cli = (...args: string[]) =>
        run(process.execPath, [CLI, 'plants', 'list', ...args], { env: { ...process.env, DATABASE_URL: t.databaseUrl, LOG_LEVEL: 'silent' } });

      it('prints the plants with tag x as JSON lines, ids exact, in id order', async () => {
        const { stdout } = await cli('--tag', 'x');
        assert.equal(stdout, [plantJson(INT64_MIN, `cli ${INT64_MIN}`, 'x'), plantJson(PAST_DOUBLE, `cli ${PAST_DOUBLE}`, 'x'), plantJson(INT64_MAX, `cli ${INT64_MAX}`, 'x')].map((line) => `${line}\n`).join(''));
      });

      it('prints every plant without --tag, and the first N with --limit', async () => {
        const all = await cli();
        assert.deepEqual(idsOf(all.stdout), [BigInt(INT64_MIN), 3n, 4n, BigInt(PAST_DOUBLE), BigInt(INT64_MAX)]);
        assert.ok(all.stdout.split('\n').includes('{"id":4,"name":"cli 4"}'));
        const two = await cli('--limit', '2');
        assert.deepEqual(idsOf(two.stdout), [BigInt(INT64_MIN), 3n]);
      });

      it('refuses a bad --limit with usage and exit code 2', async () => {
        await assert.rejects(cli('--limit', '0'), (error: { code?: number; stderr?: string; stdout?: string }) => {
          assert.equal(error.code, 2);
          assert.match(error.stderr ?? '', /--limit needs a positive integer/);
          assert.equal(error.stdout, '');
          return true;
        });
      });
    });
  });
}
