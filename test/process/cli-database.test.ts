/**
 * No database by accident: a mistyped DATABASE_URL, or a command run from another working directory, must not
 * quietly become a new, empty SQLite database that the servers never see. Commands that only read, change what
 * exists, or copy out refuse a file that is not there, naming its absolute path and creating nothing, not even its
 * folder; commands that may start a database say so, once, when they did. Real processes through the built `bin`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { CLI, startServer } from '../helpers/process.js';

let dir: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-cli-database-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI in `dir`, on the relative `sqlite:./data/plants.db`; `input` goes to its stdin. */
function cli(args: string[], input = '', databaseUrl = 'sqlite:./data/plants.db') {
  const result = spawnSync(process.execPath, [CLI, ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' },
    cwd: dir,
    input,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** What `dir` holds, as relative paths: the test's own files and whatever a command created. */
function contents(): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).sort();
}

const CREATED = (file: string) => `created a new database at ${file}\n`;

describe('commands that only read, change what exists, or copy out', () => {
  const refusing: ReadonlyArray<string[]> = [
    ['plants', 'list'],
    ['token', 'list'],
    ['token', 'revoke', 'ops'],
    ['webhook', 'list'],
    ['webhook', 'deliveries'],
    ['webhook', 'remove', 'shop'],
    ['webhook', 'disable', 'shop'],
    ['webhook', 'enable', 'shop'],
    ['webhook', 'rotate-secret', 'shop'],
    ['webhook', 'redeliver', 'abc_1'],
    ['export'],
    ['export', '--out', 'plants.jsonl'],
    ['backup', 'backup.db'],
    ['import', '--dry-run'],
    ['copy', '--to', 'sqlite:./target.db'],
  ];
  for (const args of refusing) {
    it(`plantstore ${args.join(' ')} refuses a SQLite file that does not exist: exit 1, one line naming it, nothing created`, () => {
      const result = cli(args, '{"id":1,"name":"a"}\n');
      const file = path.join(fs.realpathSync(dir), 'data', 'plants.db');
      assert.equal(result.status, 1, result.stderr);
      assert.equal(result.stdout, '');
      const lines = result.stderr.split('\n').filter((line) => line !== '' && !line.startsWith('copy: from '));
      assert.equal(lines.length, 1, result.stderr);
      assert.equal(lines[0], `plantstore: no SQLite database at ${file}: check DATABASE_URL (a relative sqlite: path is read from the working directory)`);
      assert.deepEqual(contents(), [], 'nothing was created, not even the data folder');
    });
  }
});

describe('commands that may start a database', () => {
  /** Each command, what to run the second time (a name may be taken only once), and its input. */
  const creating: ReadonlyArray<readonly [args: string[], again: string[], input?: string]> = [
    [['migrate'], ['migrate']],
    [['token', 'create', '--name', 'ops'], ['token', 'create', '--name', 'other']],
    [['import'], ['import'], '{"id":1,"name":"a"}\n'],
    [['webhook', 'add', '--url', 'https://hooks.example.com/plants'], ['webhook', 'add', '--url', 'https://hooks.example.com/plants', '--name', 'other']],
  ];
  for (const [args, againArgs, input] of creating) {
    it(`plantstore ${args.join(' ')} says once on stderr that it created the database, and only the first time`, () => {
      const file = path.join(fs.realpathSync(dir), 'data', 'plants.db');
      const first = cli(args, input);
      assert.equal(first.status, 0, first.stderr);
      assert.ok(first.stderr.startsWith(CREATED(file)), first.stderr);
      assert.equal(first.stderr.split(CREATED(file)).length, 2, `said once: ${first.stderr}`);
      assert.ok(fs.existsSync(file));
      const again = cli(againArgs, input);
      assert.equal(again.status, 0, again.stderr);
      assert.ok(!again.stderr.includes('created a new database'), again.stderr);
    });
  }

  it('plantstore restore FILE into a database that does not exist says it created it', () => {
    assert.equal(cli(['token', 'create', '--name', 'ops'], '', 'sqlite:./source.db').status, 0);
    const backup = cli(['backup', 'backup.db'], '', 'sqlite:./source.db');
    assert.equal(backup.status, 0, backup.stderr);
    const file = path.join(fs.realpathSync(dir), 'data', 'plants.db');
    const restored = cli(['restore', 'backup.db']);
    assert.equal(restored.status, 0, restored.stderr);
    assert.ok(restored.stderr.startsWith(CREATED(file)), restored.stderr);
    assert.match(cli(['token', 'list']).stdout, /^ops\t/);
  });

  it("plantstore copy --to a SQLite file that does not exist says it created the target (and the source must exist)", () => {
    assert.equal(cli(['token', 'create', '--name', 'ops']).status, 0);
    const target = path.join(fs.realpathSync(dir), 'target.db');
    const copied = cli(['copy', '--to', 'sqlite:./target.db']);
    assert.equal(copied.status, 0, copied.stderr);
    assert.equal(copied.stderr.split(CREATED(target)).length, 2, copied.stderr);
    assert.match(copied.stderr, /copy: verified/);
  });

  it('plantstore serve says it created the database, once, and not on the next start', async () => {
    const file = path.join(dir, 'served.db');
    const first = await startServer({ DATABASE_URL: `sqlite:${file}` });
    assert.equal((await first.stop()).code, 0);
    assert.equal(first.output().stderr.split(CREATED(file)).length, 2, first.output().stderr);
    const second = await startServer({ DATABASE_URL: `sqlite:${file}` });
    assert.equal((await second.stop()).code, 0);
    assert.ok(!second.output().stderr.includes('created a new database'), second.output().stderr);
  });
});
