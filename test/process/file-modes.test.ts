import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { CLI, freePort } from '../helpers/process.js';

/**
 * The SQLite database is private to its owner: a folder plantstore creates is 0700 and the database, its -wal and
 * its -shm are 0600, whatever the umask. Every process runs under an explicit umask: the usual 022, and 000, under
 * which only plantstore's own modes keep the files private.
 */
const UMASKS = ['022', '000'] as const;

function modeOf(file: string): string {
  return (fs.statSync(file).mode & 0o777).toString(8).padStart(4, '0');
}

/** `sh -c 'umask U; exec node …'`: the umask applies to the plantstore process itself, not to this one. */
function underUmask(umask: string, args: readonly string[]): [string, string[]] {
  return ['sh', ['-c', `umask ${umask} && exec "$0" "$@"`, process.execPath, CLI, ...args]];
}

function cli(umask: string, args: readonly string[], env: Record<string, string>) {
  const [command, argv] = underUmask(umask, args);
  const result = spawnSync(command, argv, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  assert.equal(result.status, 0, `plantstore ${args.join(' ')}: ${result.stderr}`);
  return result;
}

async function serve(umask: string, env: Record<string, string>): Promise<{ base: string; child: ChildProcess; stop(): Promise<number | null> }> {
  const port = await freePort();
  const [command, argv] = underUmask(umask, ['serve']);
  const child = spawn(command, argv, {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, HOST: '127.0.0.1', PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = once(child, 'exit');
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    return code;
  };
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 30_000; ; ) {
    if (child.exitCode !== null) throw new Error(`serve exited ${child.exitCode}: ${stderr}`);
    const ok = await fetch(`${base}/healthz`).then((response) => response.ok, () => false);
    if (ok) return { base, child, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`serve did not answer /healthz: ${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('SQLite file modes', () => {
  let root: string;

  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-modes-'));
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  for (const umask of UMASKS) {
    for (const command of [['migrate'], ['token', 'create', '--name', 'ops']]) {
      it(`plantstore ${command.join(' ')} under umask ${umask} creates its folders 0700 and the database 0600`, () => {
        const top = fs.mkdtempSync(path.join(root, 'cli-'));
        const file = path.join(top, 'created', 'data', 'plants.db');
        cli(umask, command, { DATABASE_URL: `sqlite:${file}` });
        assert.equal(modeOf(path.join(top, 'created')), '0700', 'every folder plantstore created');
        assert.equal(modeOf(path.dirname(file)), '0700');
        assert.equal(modeOf(file), '0600');
        // The last connection to close removes the -wal and -shm; any left behind must be private too.
        for (const side of [`${file}-wal`, `${file}-shm`]) if (fs.existsSync(side)) assert.equal(modeOf(side), '0600', side);
      });
    }

    it(`plantstore restore into a new path under umask ${umask} creates its folders 0700 and the database 0600`, () => {
      const top = fs.mkdtempSync(path.join(root, 'restore-'));
      const source = path.join(top, 'source', 'plants.db');
      const backup = path.join(top, 'plants.backup.db');
      cli('077', ['token', 'create', '--name', 'ops'], { DATABASE_URL: `sqlite:${source}` });
      cli('077', ['backup', backup], { DATABASE_URL: `sqlite:${source}` });
      const file = path.join(top, 'restored', 'data', 'plants.db');
      cli(umask, ['restore', backup], { DATABASE_URL: `sqlite:${file}` });
      assert.equal(modeOf(path.join(top, 'restored')), '0700', 'every folder restore created');
      assert.equal(modeOf(path.dirname(file)), '0700');
      assert.equal(modeOf(file), '0600');
      for (const side of [`${file}-wal`, `${file}-shm`]) if (fs.existsSync(side)) assert.equal(modeOf(side), '0600', side);
    });

    it(`a served write under umask ${umask} leaves the database, its -wal and -shm 0600 in a 0700 folder`, async () => {
      const file = path.join(fs.mkdtempSync(path.join(root, 'serve-')), 'data', 'plants.db');
      const env = { DATABASE_URL: `sqlite:${file}` };
      // The server creates the database; the token comes after, from the CLI, as an operator would do it.
      const server = await serve(umask, env);
      try {
        const token = cli(umask, ['token', 'create', '--name', 'writer'], env).stdout.trim();
        const created = await fetch(`${server.base}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: '{"id":1,"name":"Fern"}',
        });
        assert.equal(created.status, 200);
        // Checked while the server holds the database open, so that the -wal and -shm exist.
        assert.equal(modeOf(path.dirname(file)), '0700');
        for (const each of [file, `${file}-wal`, `${file}-shm`]) assert.equal(modeOf(each), '0600', each);
      } finally {
        assert.equal(await server.stop(), 0);
      }
    });
  }

  it('an existing folder keeps its mode; an older 0644 database, -wal and -shm are made 0600, and stderr says so', () => {
    const folder = fs.mkdtempSync(path.join(root, 'existing-'));
    fs.chmodSync(folder, 0o755);
    const file = path.join(folder, 'plants.db');
    // What an older version left: a 0644 database, and a -wal and -shm (0644 too: SQLite copies the database's
    // mode to them) still there because a connection has it open, as after a crash or with a server running.
    fs.writeFileSync(file, '');
    fs.chmodSync(file, 0o644);
    const older = new DatabaseSync(file);
    try {
      older.exec('PRAGMA journal_mode = WAL');
      older.exec('CREATE TABLE left_by_an_older_version (x)');
      for (const each of [file, `${file}-wal`, `${file}-shm`]) assert.equal(modeOf(each), '0644', `${each} before`);

      const result = cli('000', ['migrate'], { DATABASE_URL: `sqlite:${file}` });
      assert.equal(modeOf(folder), '0755', "the operator's folder is theirs");
      for (const each of [file, `${file}-wal`, `${file}-shm`]) {
        assert.equal(modeOf(each), '0600', each);
        assert.ok(result.stderr.includes(`${each} was readable by others (mode 0644); made it private to its owner (mode 0600)`), result.stderr);
      }
      // Tightened once: the next run has nothing to say.
      assert.doesNotMatch(cli('000', ['migrate'], { DATABASE_URL: `sqlite:${file}` }).stderr, /readable by others/);
    } finally {
      older.close();
    }
  });
});
