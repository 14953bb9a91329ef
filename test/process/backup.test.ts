import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { postgresDatabase, sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { CLI, createToken, startServer } from '../helpers/process.js';
import { keepWriting, numberedPlants, plantstore, plantstoreAsync, postPlant, sqliteFile, storePlants } from '../helpers/transfer.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { SQLITE_SCHEMA_VERSION } from '../../src/storage/sqlite/migrations.js';
import { exportPlants } from '../../src/transfer/export.js';
import { pragmaValue, pragmaValues, prepareValue } from '../../src/storage/sqlite/connection.js';

stopPostgresAfterAll();

/** Every plant id in a SQLite file, read directly. */
function idsIn(file: string): Set<bigint> {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return new Set(prepareValue<[], bigint>(db, 'SELECT id FROM plants', { bigInts: true }).all());
  } finally {
    db.close();
  }
}

function integrityOf(file: string): string[] {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return pragmaValues(db, 'integrity_check').map(String);
  } finally {
    db.close();
  }
}

/**
 * What `plantstore export` prints, read in-process the way that command reads it (this file starts the CLI for what
 * it tests, backup and restore, not to read a database): the database's content, to compare before and after.
 */
async function exported(env: Record<string, string>): Promise<string> {
  const store = await openStore(loadConfig(env).database, { mustExist: true });
  try {
    let text = '';
    await exportPlants(store.plants, {
      write: (page) => {
        text += page;
        return Promise.resolve(true);
      },
    });
    return text;
  } finally {
    await store.close();
  }
}

/** Files a run may have left in `dir` under a partial name. */
function partials(dir: string): string[] {
  return fs.readdirSync(dir).filter((name) => name.includes('.partial-'));
}

describe('plantstore backup and restore (SQLite)', () => {
  let db: TestDatabase;
  let env: Record<string, string>;
  let dir: string;

  before(async () => {
    db = await sqliteDatabase();
    env = { DATABASE_URL: db.url };
    dir = path.dirname(sqliteFile(db.url));
  });
  after(() => db?.cleanup());

  it('copies the database consistently while a server is being written to: every create acknowledged before it began is in it', async () => {
    const token = createToken('writer', env);
    const server = await startServer(env);
    try {
      // Enough data that the copy takes a while, and writes landing in the -wal file throughout.
      await storePlants(db.url, numberedPlants(50_000, 1_000_000_000n));
      const load = keepWriting(server.base, token, 8, 1n);
      // Counted, not timed: a loaded machine acknowledged only 10 creates in the 500 ms this once waited.
      await waitFor('50 creates acknowledged before the backup', () => load.acknowledged.length > 50, { timeoutMs: 60_000 });
      const backupFile = path.join(dir, 'under-load.db');
      const startedAt = Date.now();
      const result = await plantstoreAsync(['backup', backupFile], env);
      const finishedAt = Date.now();
      // Writes go on after the backup, so the check below is not trivially about a still database.
      await waitFor('a create acknowledged after the backup', () => load.acknowledged.some((ack) => ack.at > finishedAt), { timeoutMs: 60_000 });
      await load.stop();
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stderr, /backed up .* to .*under-load\.db: \d+ plants, 1 tokens, schema version \d+; integrity check ok/);
      assert.equal(result.stdout, '', 'data only on stdout, and a backup prints none');

      assert.deepEqual(integrityOf(backupFile), ['ok']);
      const inBackup = idsIn(backupFile);
      const before = load.acknowledged.filter((ack) => ack.at < startedAt);
      const duringOrAfter = load.acknowledged.filter((ack) => ack.at > finishedAt);
      assert.ok(before.length > 50, `only ${before.length} creates were acknowledged before the backup began`);
      assert.ok(duringOrAfter.length > 0, 'the server kept taking writes after the backup');
      const missing = before.filter((ack) => !inBackup.has(ack.id));
      assert.deepEqual(missing, [], 'every create acknowledged before the backup began is in it');
      for (let id = 1_000_000_000n; id < 1_000_050_000n; id += 1n) assert.ok(inBackup.has(id));
      // The server was never held up by the backup: nothing refused, nothing slow.
      assert.deepEqual(load.refused, []);
      assert.ok(load.slowestMs() < 2000, `the slowest create took ${load.slowestMs()} ms`);

      // A backup is one self-contained file, private to its owner, and nothing partial is left behind.
      assert.equal(fs.statSync(backupFile).mode & 0o777, 0o600);
      assert.ok(!fs.existsSync(`${backupFile}-wal`));
      const copy = new DatabaseSync(backupFile, { readOnly: true });
      assert.equal(pragmaValue(copy, 'journal_mode'), 'delete');
      copy.close();
      assert.deepEqual(partials(dir), []);
    } finally {
      await server.stop();
    }
  });

  it('replaces an existing backup file whole, and refuses to write over the database or its -wal', async () => {
    const target = path.join(dir, 'nightly.db');
    fs.writeFileSync(target, 'yesterday');
    const first = plantstore(['backup', target], env);
    assert.equal(first.status, 0, first.stderr);
    assert.deepEqual(integrityOf(target), ['ok']);
    const database = sqliteFile(db.url);
    const content = await exported(env);
    for (const file of [database, `${database}-wal`]) {
      const refused = plantstore(['backup', file], env);
      assert.equal(refused.status, 1);
      assert.match(refused.stderr, /is the database itself/);
    }
    assert.equal(await exported(env), content);
    assert.deepEqual(partials(dir), []);
  });

  it('never leaves a file that looks complete when interrupted', async () => {
    const big = await sqliteDatabase();
    try {
      await storePlants(big.url, numberedPlants(400_000));
      const bigDir = path.dirname(sqliteFile(big.url));
      const target = path.join(bigDir, 'interrupted.db');
      const child = spawn(process.execPath, [CLI, 'backup', target], { env: { ...process.env, DATABASE_URL: big.url }, stdio: 'ignore' });
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once('exit', (code, signal) => resolve({ code, signal })),
      );
      // Killed once the copy has started writing.
      for (;;) {
        const partial = partials(bigDir)[0];
        if (partial !== undefined && fs.statSync(path.join(bigDir, partial)).size > 0) break;
        if (child.exitCode !== null) break;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      child.kill('SIGKILL');
      const exit = await exited;
      assert.equal(exit.signal, 'SIGKILL', 'the backup was still running when killed');
      assert.ok(!fs.existsSync(target), 'no file under the backup name');
      const left = fs.readdirSync(bigDir).filter((name) => name.includes('interrupted'));
      assert.ok(left.length > 0 && left.every((name) => name.startsWith('.interrupted.db.partial-')), `left: ${left.join(', ')}`);
    } finally {
      await big.cleanup();
    }
  });

  it('restores a backup: the data is as it was when the backup was taken, even with a stale -wal from a killed server', async () => {
    const token = createToken('restorer', env);
    const server = await startServer(env);
    const backupFile = path.join(dir, 'round-trip.db');
    let atBackup: string;
    try {
      for (const body of ['{"id":-9223372036854775808,"name":"min"}', '{"id":9223372036854775807,"name":"max","tag":""}']) {
        assert.equal((await postPlant(server.base, token, body)).status, 200);
      }
      // Every command beside the server runs without blocking this event loop (see plantstoreAsync).
      assert.equal((await plantstoreAsync(['backup', backupFile], env)).status, 0);
      atBackup = await exported(env);
      // Changes after the backup: a new plant, a deleted one, a revoked token.
      assert.equal((await postPlant(server.base, token, '{"id":9007199254740993,"name":"after"}')).status, 200);
      const deleted = await fetch(`${server.base}/plants/-9223372036854775808`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
      assert.equal(deleted.status, 204);
      assert.notEqual(await exported(env), atBackup);

      // While the server runs, restore is refused and changes nothing.
      const refused = await plantstoreAsync(['restore', backupFile], env);
      assert.equal(refused.status, 1);
      assert.match(refused.stderr, /in use by another process .*stop it, then restore/);
      assert.equal((await postPlant(server.base, token, '{"id":-5,"name":"still served"}')).status, 200, 'the server is unaffected');
      assert.match(await exported(env), /still served/);
    } finally {
      // Killed, not stopped: its last commits may still be in the -wal, which the restore must not let back in.
      await server.kill();
    }
    assert.equal(plantstore(['token', 'revoke', 'restorer'], env).status, 0);
    const restored = plantstore(['restore', backupFile], env);
    assert.equal(restored.status, 0, restored.stderr);
    assert.match(restored.stderr, /^restored .*round-trip\.db into .*: \d+ plants, \d+ tokens; tokens revoked since the backup was taken are valid again/);
    assert.equal(await exported(env), atBackup);
    assert.deepEqual(integrityOf(sqliteFile(db.url)), ['ok']);
    assert.deepEqual(partials(dir), []);

    // A server on the restored database serves its data, and the token revoked after the backup works again.
    const again = await startServer(env);
    try {
      const read = await fetch(`${again.base}/plants/-9223372036854775808`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(read.status, 200);
      assert.equal(await read.text(), '{"id":-9223372036854775808,"name":"min"}');
      const gone = await fetch(`${again.base}/plants/9007199254740993`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(gone.status, 404);
    } finally {
      await again.stop();
    }
  });

  it('restores into a place where no database exists yet, and a backup of an older schema is upgraded', async () => {
    const backupFile = path.join(dir, 'old-schema.db');
    assert.equal(plantstore(['backup', backupFile], env).status, 0);
    const content = await exported(env);
    // What plantstore's first schema looked like: no heartbeat table, no webhook tables, no change log, tokens
    // without scopes or expiry, the tag index over every plant on (tag, id), user_version 1.
    const old = new DatabaseSync(backupFile);
    old.exec('DROP TABLE plantstore_heartbeat; DROP TABLE webhook_attempts; DROP TABLE webhook_events; DROP TABLE webhook_subscriptions; DROP TABLE plant_changes');
    old.exec('DROP INDEX plants_by_tag; CREATE INDEX plants_by_tag ON plants (tag, id)');
    old.exec('ALTER TABLE tokens DROP COLUMN expires_at; ALTER TABLE tokens DROP COLUMN scopes');
    old.exec("INSERT INTO tokens (name, hash, created_at) VALUES ('from-v1', zeroblob(32), 0)");
    old.exec('PRAGMA user_version = 1');
    old.close();
    const fresh = { DATABASE_URL: `sqlite:${path.join(dir, 'new-place', 'plants.db')}` };
    const restored = plantstore(['restore', backupFile], fresh);
    assert.equal(restored.status, 0, restored.stderr);
    assert.equal(await exported(fresh), content);
    const db2 = new DatabaseSync(path.join(dir, 'new-place', 'plants.db'), { readOnly: true });
    assert.equal(pragmaValue(db2, 'user_version'), SQLITE_SCHEMA_VERSION);
    db2.close();
    // Its token could do everything there was, and still can.
    assert.match(plantstore(['token', 'list'], fresh).stdout, /^from-v1\tcreated 1970-01-01T00:00:00\.000Z\tlast used never\tscopes plants:read,plants:create,plants:delete\texpires never$/m);
  });

  it('refuses a backup that is not a whole, healthy plantstore database, naming the problem, and changes nothing', async () => {
    const content = await exported(env);
    const database = sqliteFile(db.url);
    const cases: Array<{ file: string; make: (file: string) => void; problem: RegExp }> = [
      { file: 'missing.db', make: () => undefined, problem: /there is no backup at .*missing\.db/ },
      { file: 'text.db', make: (file) => fs.writeFileSync(file, 'not a database at all, but long enough to have a header '.repeat(100)), problem: /is not a SQLite database/ },
      {
        file: 'other-app.db',
        make: (file) => {
          const other = new DatabaseSync(file);
          other.exec('CREATE TABLE notes (body TEXT)');
          other.close();
        },
        problem: /is not a plantstore database/,
      },
      {
        file: 'extra-table.db',
        make: (file) => {
          assert.equal(plantstore(['backup', file], env).status, 0);
          const extra = new DatabaseSync(file);
          extra.exec('CREATE TABLE extra (x)');
          extra.close();
        },
        problem: new RegExp(`holds a table extra that plantstore schema version ${SQLITE_SCHEMA_VERSION} does not have`),
      },
      {
        file: 'newer.db',
        make: (file) => {
          assert.equal(plantstore(['backup', file], env).status, 0);
          const newer = new DatabaseSync(file);
          newer.exec('PRAGMA user_version = 99');
          newer.close();
        },
        problem: /schema version 99, newer than this plantstore's/,
      },
      {
        file: 'damaged.db',
        make: (file) => {
          assert.equal(plantstore(['backup', file], env).status, 0);
          // Scribble over the last page, where the index or table pages of the data are.
          const bytes = fs.readFileSync(file);
          const pageSize = bytes.readUInt16BE(16);
          bytes.fill(0x5a, bytes.length - pageSize + 8, bytes.length - 8);
          fs.writeFileSync(file, bytes);
        },
        problem: /fails PRAGMA integrity_check|is damaged/,
      },
    ];
    for (const { file, make, problem } of cases) {
      const backupFile = path.join(dir, file);
      make(backupFile);
      const result = plantstore(['restore', backupFile], env);
      assert.equal(result.status, 1, `${file}: ${result.stderr}`);
      assert.match(result.stderr, problem, file);
      assert.equal(await exported(env), content, `${file} changed nothing`);
    }
    const itself = plantstore(['restore', database], env);
    assert.equal(itself.status, 1);
    assert.match(itself.stderr, /is the database itself/);
    assert.deepEqual(partials(dir), []);
  });

  it('needs exactly one FILE', () => {
    for (const args of [['backup'], ['restore'], ['backup', 'a', 'b']]) {
      const result = plantstore(args, env);
      assert.equal(result.status, 2, args.join(' '));
      assert.match(result.stderr, /needs exactly one FILE/);
    }
  });
});

describe('plantstore backup and restore on PostgreSQL', () => {
  it('explain that pg_dump and pg_restore are the tools, and exit 2', async () => {
    const db = await postgresDatabase();
    try {
      for (const command of ['backup', 'restore']) {
        const result = plantstore([command, 'some.file'], { DATABASE_URL: db.url });
        assert.equal(result.status, 2);
        assert.match(result.stderr, new RegExp(`${command} works on a SQLite database.*pg_dump --format=custom.*pg_restore`));
        assert.ok(!fs.existsSync('some.file'));
      }
    } finally {
      await db.cleanup();
    }
  });
});
