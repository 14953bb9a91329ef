/**
 * Storage failures on SQLite (disk full, read-only file system, a database locked by another process) are answered
 * with 503 Error records carrying Retry-After, /readyz turns 503, the process stays up, and both recover once the
 * cause goes away. Disk full and read-only use a small tmpfs mounted by the test (root only; skipped, and said so,
 * elsewhere). A write that finds the lock taken waits on a timer, so the event loop keeps serving meanwhile.
 */
import './helpers/exit-guard.js';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { LightMyRequestResponse } from 'fastify';
import { ServiceUnavailableError } from '../src/errors.js';
import { REFUSAL_MEMORY_MS } from '../src/storage/group-commit.js';
import { openStore } from '../src/storage/open.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { sqliteDatabase } from './helpers/databases.js';
import { CLI, errorRecordProblem } from './helpers/process.js';

function assertUnavailable(response: LightMyRequestResponse): void {
  assert.equal(response.statusCode, 503, response.body);
  assert.equal(errorRecordProblem(503, response.headers['content-type'] as string | undefined, response.body), undefined);
  assert.equal((response.json() as { message: string }).message, 'storage is unavailable; retry shortly');
  assert.match(String(response.headers['retry-after']), /^[1-9]\d*$/);
}

let nextId = 1;
const create = (t: TestApp, name = 'Storage test') =>
  t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: JSON.stringify({ id: nextId++, name }) });

/** A tmpfs of its own, or the reason there is none. */
function mountTmpfs(sizeKiB: number): { dir: string; unmount(): void } | string {
  if (process.platform !== 'linux') return 'tmpfs mounts need Linux';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-fs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (error) {
    fs.rmSync(dir, { recursive: true, force: true });
    return `cannot mount a tmpfs here (${String((error as { stderr?: Buffer }).stderr ?? error).trim()}); run as root to test disk-full and read-only file systems`;
  }
  let mounted = true;
  return {
    dir,
    unmount() {
      if (!mounted) return;
      mounted = false;
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('storage failures on SQLite', { timeout: 120_000 }, () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    // Apps close before their file systems go; mounts never outlive a test.
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  after(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('a full disk → 503 Error records; the process stays up; creates succeed once space is freed', async (t) => {
    const fsOrReason = mountTmpfs(4096);
    if (typeof fsOrReason === 'string') {
      t.skip(fsOrReason);
      return;
    }
    cleanups.push(() => fsOrReason.unmount());
    const app = await startTestApp(`sqlite:${path.join(fsOrReason.dir, 'plants.db')}`);
    cleanups.push(() => app.close().catch(() => undefined));
    assert.equal((await create(app)).statusCode, 200);

    // Fill every byte left on the file system.
    const filler = path.join(fsOrReason.dir, 'filler');
    const fd = fs.openSync(filler, 'w');
    const block = Buffer.alloc(64 * 1024, 1);
    try {
      for (;;) fs.writeSync(fd, block);
    } catch (error) {
      assert.equal((error as NodeJS.ErrnoException).code, 'ENOSPC');
    }
    try {
      for (;;) fs.writeSync(fd, block.subarray(0, 512));
    } catch {
      // full to the last block
    }
    fs.closeSync(fd);

    // Creates large enough to need new pages in the WAL cannot be stored.
    let refused = 0;
    for (let i = 0; i < 20; i += 1) {
      const response = await create(app, 'x'.repeat(250));
      if (response.statusCode === 503) {
        assertUnavailable(response);
        refused += 1;
      } else {
        assert.equal(response.statusCode, 200, response.body);
      }
    }
    assert.ok(refused > 0, 'a full disk refuses creates');
    assert.equal((await app.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process stays up');
    // Refused again right before the check, so the latest batch is a refused one whatever the loop above ended on.
    assertUnavailable(await create(app, 'y'.repeat(250)));
    assertUnavailable(await app.app.inject({ method: 'GET', url: '/readyz' }));
    t.diagnostic(`disk full: ${refused} of 20 creates refused with 503; /readyz 503`);

    fs.rmSync(filler);
    const recovered = await create(app, 'After the disk was freed');
    assert.equal(recovered.statusCode, 200, recovered.body);
    assert.equal((await app.store.getPlant(BigInt(nextId - 1)))?.name, 'After the disk was freed');
    assert.equal((await app.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  });

  it('a read-only file system at start → the store refuses to open with a 503-class error, and serve exits 1 with a message', async (t) => {
    // The kernel refuses to remount a file system read-only while SQLite holds its files open for writing (EBUSY),
    // so a file system turning read-only under a running server cannot be simulated here; starting on one can.
    const fsOrReason = mountTmpfs(8192);
    if (typeof fsOrReason === 'string') {
      t.skip(fsOrReason);
      return;
    }
    cleanups.push(() => fsOrReason.unmount());
    const file = path.join(fsOrReason.dir, 'plants.db');
    await (await openStore({ kind: 'sqlite', path: file })).close();
    execFileSync('mount', ['-o', 'remount,ro', fsOrReason.dir], { stdio: 'pipe' });
    cleanups.push(() => {
      execFileSync('mount', ['-o', 'remount,rw', fsOrReason.dir], { stdio: 'pipe' });
    });
    await assert.rejects(openStore({ kind: 'sqlite', path: file }), (error: unknown) => {
      assert.ok(error instanceof ServiceUnavailableError);
      return true;
    });
    const serve = spawnSync(process.execPath, [CLI, 'serve'], {
      env: { ...process.env, DATABASE_URL: `sqlite:${file}`, PORT: '0' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(serve.status, 1);
    assert.match(serve.stderr, /^plantstore: storage is unavailable/);
    t.diagnostic(`serve on a read-only file system: exit ${serve.status}, stderr ${JSON.stringify(serve.stderr.trim())}`);
  });

  it('a database locked by another process → /readyz 503 within about a second, creates 503 after the busy timeout; both recover once the lock is released', async (t) => {
    const db = await sqliteDatabase();
    cleanups.push(() => db.cleanup());
    const app = await startTestApp(db.url);
    cleanups.push(() => app.close().catch(() => undefined));
    assert.equal((await create(app)).statusCode, 200);

    // Another connection (as another process would) holds the write lock.
    const other = new Database(db.url.slice('sqlite:'.length));
    cleanups.push(() => {
      if (other.open) other.close();
    });
    other.exec('BEGIN EXCLUSIVE');
    // Before any create is refused, the heartbeat write alone finds the lock, waiting only about a second.
    let started = Date.now();
    assertUnavailable(await app.app.inject({ method: 'GET', url: '/readyz' }));
    const probeWaited = Date.now() - started;
    assert.ok(probeWaited < 2500, `the readiness probe answered after ${probeWaited} ms`);
    started = Date.now();
    assertUnavailable(await create(app));
    const createWaited = Date.now() - started;
    assertUnavailable(await app.app.inject({ method: 'GET', url: '/readyz' }));
    // Reads still work in WAL mode while another connection writes, and the process stays up.
    assert.equal((await app.app.inject({ method: 'GET', url: `/plants/${nextId - 2}`, headers: app.headers })).statusCode, 200);
    assert.equal((await app.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);

    other.exec('ROLLBACK');
    other.close();
    // Ready again by itself, with no create sent meanwhile (a balancer sends none to an unready instance).
    started = Date.now();
    let ready = 0;
    while (ready !== 200 && Date.now() - started < REFUSAL_MEMORY_MS + 3000) {
      ready = (await app.app.inject({ method: 'GET', url: '/readyz' })).statusCode;
      if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const readyAfter = Date.now() - started;
    assert.equal(ready, 200, `/readyz still ${ready} ${readyAfter} ms after the lock was released`);
    const recovered = await create(app, 'Unlocked');
    assert.equal(recovered.statusCode, 200, recovered.body);
    t.diagnostic(
      `locked database: /readyz 503 after ${probeWaited} ms, create 503 after ${createWaited} ms (the busy timeout); ` +
        `/readyz 200 again ${readyAfter} ms after the release, with no create sent`,
    );
  });

  it('a database file deleted from under the server → the process stays up and answers Error records, never 500', async () => {
    const db = await sqliteDatabase();
    cleanups.push(() => db.cleanup());
    const app = await startTestApp(db.url);
    cleanups.push(() => app.close().catch(() => undefined));
    assert.equal((await create(app)).statusCode, 200);
    const file = db.url.slice('sqlite:'.length);
    for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
    // SQLite keeps the open (now unlinked) files: creates may still succeed into them, or fail with a 503.
    const response = await create(app);
    assert.ok(response.statusCode === 200 || response.statusCode === 503, response.body);
    if (response.statusCode === 503) assertUnavailable(response);
    assert.equal((await app.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  });
});
