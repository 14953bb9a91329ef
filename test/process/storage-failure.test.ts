/**
 * Storage failures on SQLite (disk full, read-only file system, a database locked by another process) are answered
 * with 503 Error records carrying Retry-After, /readyz turns 503, the process stays up, and both recover once the
 * cause goes away. Reads need neither space nor the write lock (WAL), so they keep answering 200. Disk full and read-only use a small tmpfs mounted by the test (root only; skipped, and said so,
 * elsewhere). A write that finds the lock taken waits on a timer, so the event loop keeps serving meanwhile.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import type { LightMyRequestResponse } from 'fastify';
import { REFUSAL_MEMORY_MS } from '../../src/plants/write-bound.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { openStore } from '../../src/storage/open.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { sqliteDatabase } from '../helpers/databases.js';
import { CLI, createToken, errorRecordProblem, startServer } from '../helpers/process.js';

function assertUnavailable(response: LightMyRequestResponse): void {
  assert.equal(response.statusCode, 503, response.body);
  assert.equal(errorRecordProblem(503, response.headers['content-type'] as string | undefined, response.body), undefined);
  assert.equal((response.json() as { message: string }).message, 'storage is unavailable; retry shortly');
  assert.match(String(response.headers['retry-after']), /^[1-9]\d*$/);
}

let nextId = 1;
const create = (t: TestApp, name = 'Storage test', tag?: string) =>
  t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: JSON.stringify({ id: nextId++, name, tag }) });
const request = (t: TestApp, method: 'GET' | 'DELETE', url: string) =>
  t.app.inject({ method, url, headers: { authorization: t.headers.authorization as string } });

/**
 * Plants created together, so they share one batch and one commit: seeding them adds little to the WAL, and WAL space
 * already allocated is what lets some writes succeed on a full disk.
 */
async function seed(t: TestApp, count: number, tag: string): Promise<number[]> {
  const ids = Array.from({ length: count }, () => nextId++);
  const responses = await Promise.all(
    ids.map((id) => t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: JSON.stringify({ id, name: `Seed ${id}`, tag }) })),
  );
  for (const response of responses) assert.equal(response.statusCode, 200, response.body);
  return ids;
}

/** A seeded plant reads back exactly, by id and in the list of its tag. */
async function assertReadable(t: TestApp, ids: readonly number[], tag: string): Promise<void> {
  const one = await request(t, 'GET', `/plants/${ids[0]}`);
  assert.equal(one.statusCode, 200, one.body);
  assert.equal(one.body, JSON.stringify({ id: ids[0], name: `Seed ${ids[0]}`, tag }));
  const list = await request(t, 'GET', `/plants?tag=${tag}&limit=1000`);
  assert.equal(list.statusCode, 200, list.body);
  assert.deepEqual(
    (list.json() as Array<{ id: number }>).map((plant) => plant.id),
    [...ids].sort((a, b) => a - b),
  );
}

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

/**
 * An ext4 file system of its own on a loop device, mounted with errors=remount-ro, or the reason there is none.
 * `fail()` raises an ext4 error through sysfs, and the kernel turns the file system read-only at once, under files
 * open for writing: what a real disk error does, and what `mount -o remount,ro` refuses to do (EBUSY).
 */
function mountExt4(sizeMiB: number):
  | { dir: string; fail(): void; repair(): void; unmount(): void }
  | string {
  if (process.platform !== 'linux') return 'loop devices need Linux';
  if (process.getuid?.() !== 0) return 'loop devices and mounts need root; run as root to test a file system turning read-only';
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-ext4-'));
  const image = path.join(root, 'image');
  const dir = path.join(root, 'mnt');
  fs.mkdirSync(dir);
  fs.writeFileSync(image, '');
  fs.truncateSync(image, sizeMiB * 1024 * 1024);
  let device: string | undefined;
  let mounted = false;
  const unmount = () => {
    if (mounted) {
      mounted = false;
      try {
        execFileSync('umount', [dir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
      }
    }
    if (device) execFileSync('losetup', ['-d', device], { stdio: 'pipe' });
    device = undefined;
    fs.rmSync(root, { recursive: true, force: true });
  };
  const mount = () => {
    execFileSync('mount', ['-o', 'errors=remount-ro', device as string, dir], { stdio: 'pipe' });
    mounted = true;
  };
  try {
    execFileSync('mkfs.ext4', ['-q', '-F', image], { stdio: 'pipe' });
    device = execFileSync('losetup', ['-f', '--show', image], { stdio: 'pipe', encoding: 'utf8' }).trim();
    mount();
  } catch (error) {
    unmount();
    return `cannot make an ext4 file system on a loop device here (${String((error as { stderr?: Buffer }).stderr ?? error).trim()})`;
  }
  const trigger = `/sys/fs/ext4/${path.basename(device)}/trigger_fs_error`;
  if (!fs.existsSync(trigger)) {
    unmount();
    return `this kernel has no ${trigger} to raise an ext4 error with`;
  }
  return {
    dir,
    fail: () => fs.writeFileSync(trigger, 'plantstore test'),
    // An ext4 that turned read-only on an error stays so until it is unmounted and checked.
    repair() {
      execFileSync('umount', [dir], { stdio: 'pipe' });
      mounted = false;
      // e2fsck exits 1 when it corrected something, as it does after an error.
      const check = spawnSync('e2fsck', ['-fy', device as string], { encoding: 'utf8' });
      if (check.status !== 0 && check.status !== 1) throw new Error(`e2fsck exited ${check.status}: ${check.stdout}${check.stderr}`);
      mount();
    },
    unmount,
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

  it('a full disk → creates and deletes get 503 Error records, reads 200; the process stays up; writes succeed once space is freed', async (t) => {
    const fsOrReason = mountTmpfs(4096);
    if (typeof fsOrReason === 'string') {
      t.skip(fsOrReason);
      return;
    }
    cleanups.push(() => fsOrReason.unmount());
    const app = await startTestApp(`sqlite:${path.join(fsOrReason.dir, 'plants.db')}`);
    cleanups.push(() => app.close().catch(() => undefined));
    assert.equal((await create(app)).statusCode, 200);
    const seeded = await seed(app, 30, 'full');

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

    // Creates large enough to need new pages in the WAL cannot be stored. Until the WAL space already allocated is
    // used up they can be (when a checkpoint emptied the WAL before the disk filled), so the test sends them until
    // one is refused, each answer checked for what it is.
    let stored = 0;
    let refused = 0;
    for (let i = 0; i < 200 && refused < 5; i += 1) {
      const response = await create(app, 'x'.repeat(250));
      if (response.statusCode === 503) {
        assertUnavailable(response);
        refused += 1;
      } else {
        assert.equal(response.statusCode, 200, response.body);
        assert.equal((await request(app, 'GET', `/plants/${nextId - 1}`)).statusCode, 200, 'a create answered 200 is stored');
        stored += 1;
      }
    }
    assert.equal(refused, 5, `a full disk refuses creates (${stored} stored first)`);
    assert.equal((await app.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process stays up');
    // Refused again right before the check, so the latest batch is a refused one whatever the loop above ended on.
    assertUnavailable(await create(app, 'y'.repeat(250)));
    assertUnavailable(await app.app.inject({ method: 'GET', url: '/readyz' }));

    // Reads need no space: SQLite reads the database and WAL it has, so they answer 200, not 503.
    await assertReadable(app, seeded, 'full');

    // A delete is a write too. One that fits in WAL space already allocated commits, durably, and is answered 204;
    // once none fits it is a 503 and the plant stays. Each answer is checked against what is stored.
    const gone = new Set<number>();
    let deleteRefused = 0;
    for (const id of seeded) {
      const response = await request(app, 'DELETE', `/plants/${id}`);
      const after = await request(app, 'GET', `/plants/${id}`);
      if (response.statusCode === 503) {
        assertUnavailable(response);
        assert.equal(after.statusCode, 200, `plant ${id} is still stored after its delete was refused: ${after.body}`);
        deleteRefused += 1;
        if (deleteRefused === 3) break;
      } else {
        assert.equal(response.statusCode, 204, response.body);
        assertErrorRecord(after, 404);
        gone.add(id);
      }
    }
    assert.equal(deleteRefused, 3, `a full disk refuses deletes (${gone.size} committed first)`);
    const remaining = seeded.filter((id) => !gone.has(id));
    await assertReadable(app, remaining, 'full');
    t.diagnostic(
      `disk full: ${stored} creates stored in WAL space already allocated, then creates refused with 503; /readyz 503; ` +
        `reads 200; ${gone.size} deletes committed, then deletes refused with 503`,
    );

    fs.rmSync(filler);
    const recovered = await create(app, 'After the disk was freed');
    assert.equal(recovered.statusCode, 200, recovered.body);
    assert.equal((await app.store.plants.get(BigInt(nextId - 1)))?.name, 'After the disk was freed');
    const deletedAfter = await request(app, 'DELETE', `/plants/${remaining[0]}`);
    assert.equal(deletedAfter.statusCode, 204, deletedAfter.body);
    assertErrorRecord(await request(app, 'GET', `/plants/${remaining[0]}`), 404);
    await assertReadable(app, remaining.slice(1), 'full');
    assert.equal((await app.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  });

  it('a read-only file system at start → the store refuses to open with a 503-class error, and serve exits 1 with a message', async (t) => {
    // The kernel refuses to remount a file system read-only while SQLite holds its files open for writing (EBUSY);
    // the next test turns one read-only under a running server the way a disk error does.
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
      assert.ok(error instanceof StorageUnavailableError);
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

  it('a file system turning read-only under the running server → creates and deletes 503, reads 200, /readyz 503, the process stays up; after repair nothing acknowledged is lost', async (t) => {
    const fsOrReason = mountExt4(32);
    if (typeof fsOrReason === 'string') {
      t.skip(fsOrReason);
      return;
    }
    cleanups.push(() => fsOrReason.unmount());
    const url = `sqlite:${path.join(fsOrReason.dir, 'plants.db')}`;
    const app = await startTestApp(url);
    let appOpen = true;
    const closeApp = async () => {
      if (!appOpen) return;
      appOpen = false;
      // Closing the app flushes token last-use times, a write, which fails on a read-only file system; the store is
      // closed regardless, so that the file system can be unmounted.
      await app.app.close().catch(() => undefined);
      await app.store.close();
    };
    cleanups.push(closeApp);
    const acknowledged = await seed(app, 5, 'ro');

    fsOrReason.fail();
    assert.throws(() => fs.writeFileSync(path.join(fsOrReason.dir, 'probe'), 'x'), { code: 'EROFS' }, 'the file system is read-only now');

    const refused: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const response = await create(app, 'On a read-only file system');
      assertUnavailable(response);
      refused.push(nextId - 1);
    }
    assertUnavailable(await request(app, 'DELETE', `/plants/${acknowledged[1]}`));
    assertUnavailable(await app.app.inject({ method: 'GET', url: '/readyz' }));
    // Reads need no writing: the open database and WAL are still readable, so reads answer 200.
    await assertReadable(app, acknowledged, 'ro');
    assert.equal((await app.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process stays up');

    // An ext4 turned read-only by an error needs an unmount and a check before it takes writes again, so recovery
    // here is a restart on the repaired file system, as it would be in production.
    await closeApp();
    fsOrReason.repair();
    const restarted = await startTestApp(url);
    cleanups.push(() => restarted.close().catch(() => undefined));
    await assertReadable(restarted, acknowledged, 'ro');
    for (const id of refused) assertErrorRecord(await request(restarted, 'GET', `/plants/${id}`), 404);
    assert.equal((await create(restarted, 'After the repair')).statusCode, 200);
    assert.equal((await restarted.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    t.diagnostic(
      `read-only while running: ${refused.length} creates and a delete 503, /readyz 503, reads 200; ` +
        `after e2fsck and a restart, ${acknowledged.length} acknowledged plants kept, the refused ones absent, creates 200`,
    );
  });

  it('a database locked by another process → /readyz 503 within about a second, creates and deletes 503 after the busy timeout, reads 200; all recover once the lock is released', async (t) => {
    const db = await sqliteDatabase();
    cleanups.push(() => db.cleanup());
    const app = await startTestApp(db.url);
    cleanups.push(() => app.close().catch(() => undefined));
    assert.equal((await create(app)).statusCode, 200);
    const seeded = await seed(app, 5, 'locked');

    // Another connection (as another process would) holds the write lock.
    const other = new DatabaseSync(db.url.slice('sqlite:'.length));
    cleanups.push(() => {
      if (other.isOpen) other.close();
    });
    other.exec('BEGIN EXCLUSIVE');
    // Before any create is refused, the heartbeat write alone finds the lock, waiting only about a second.
    let started = Date.now();
    assertUnavailable(await app.app.inject({ method: 'GET', url: '/readyz' }));
    const probeWaited = Date.now() - started;
    assert.ok(probeWaited < 2500, `the readiness probe answered after ${probeWaited} ms`);
    started = Date.now();
    // A delete waits for the lock as a create does; sent together, they wait out the busy timeout side by side.
    const [refusedCreate, refusedDelete] = await Promise.all([
      create(app).then((response) => ({ response, waited: Date.now() - started })),
      request(app, 'DELETE', `/plants/${seeded[0]}`).then((response) => ({ response, waited: Date.now() - started })),
    ]);
    assertUnavailable(refusedCreate.response);
    assertUnavailable(refusedDelete.response);
    const createWaited = refusedCreate.waited;
    assertUnavailable(await app.app.inject({ method: 'GET', url: '/readyz' }));
    // Reads still work in WAL mode while another connection writes, the refused delete left its plant, and the
    // process stays up.
    await assertReadable(app, seeded, 'locked');
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
    const deleted = await request(app, 'DELETE', `/plants/${seeded[0]}`);
    assert.equal(deleted.statusCode, 204, deleted.body);
    await assertReadable(app, seeded.slice(1), 'locked');
    t.diagnostic(
      `locked database: /readyz 503 after ${probeWaited} ms, create 503 after ${createWaited} ms and delete 503 after ` +
        `${refusedDelete.waited} ms (the busy timeout); reads 200; ` +
        `/readyz 200 again ${readyAfter} ms after the release, with no create sent`,
    );
  });

  it('SIGTERM while the database is locked by another process → requests answered, storage closed, exit 0', async (t) => {
    const db = await sqliteDatabase();
    cleanups.push(() => db.cleanup());
    const env = { DATABASE_URL: db.url };
    const token = createToken('shutdown', env);
    // The token map's refresh, which also writes last uses, as seldom as it can be: the use below is then left for the
    // shutdown to write, into the locked database (a refresh in between would write it first: see the end).
    const server = await startServer({ ...env, LOG_LEVEL: 'info', TOKEN_CACHE_MS: '60000' });
    cleanups.push(() => server.kill());
    const created = await fetch(`${server.base}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"id":1,"name":"Before the lock"}',
    });
    assert.equal(created.status, 200);
    // A busy timeout: the lock is taken once a write the server has in progress (its heartbeat) is done, not refused.
    const other = new DatabaseSync(db.url.slice('sqlite:'.length), { timeout: 20_000 });
    cleanups.push(() => {
      if (other.isOpen) other.close();
    });
    other.exec('BEGIN EXCLUSIVE');
    const started = Date.now();
    const { code } = await server.stop('SIGTERM', 20_000);
    const elapsed = Date.now() - started;
    other.exec('ROLLBACK');
    const lastUsed = other.prepare('SELECT last_used_at FROM tokens WHERE name = ?').get('shutdown')?.['last_used_at'];
    other.close();
    assert.equal(code, 0, server.output().stdout + server.output().stderr);
    // Logged once server.close() has resolved, which closes storage after the app.
    assert.match(server.output().stdout, /shut down cleanly/);
    // The token's last use is either stored (a refresh wrote it before the lock) or its loss is logged: never lost unsaid.
    if (lastUsed === null || lastUsed === undefined) assert.match(server.output().stdout, /recording token use failed at shutdown/);
    else assert.doesNotMatch(server.output().stdout, /recording token use failed at shutdown/);
    const lastUse = lastUsed === null || lastUsed === undefined ? 'its write at shutdown gave up after the busy timeout' : 'written before the lock';
    t.diagnostic(`SIGTERM with the database locked: exit ${code} after ${elapsed} ms (the token's last use: ${lastUse})`);
  });

  /**
   * The database file removed, or replaced by another, under a running server: SQLite would keep committing into the
   * file it has open, which no restart opens again, so every 200 would be lost. Within 2 s /readyz is 503, creates and
   * deletes are 503 (never 200), an error line names the file, and nothing is acknowledged until a restart.
   */
  for (const how of ['removed', 'replaced'] as const) {
    it(`a database file ${how} under the running server → /readyz 503 within 2 s, creates and deletes 503 until restarted, an error line naming the file`, async (t) => {
      const db = await sqliteDatabase();
      cleanups.push(() => db.cleanup());
      const file = db.url.slice('sqlite:'.length);
      const env = { DATABASE_URL: db.url };
      const token = createToken('vanishing', env);
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      // Another healthy plantstore database, to put at the path in place of the open one.
      const other = path.join(path.dirname(file), 'other.db');
      createToken('other', { DATABASE_URL: `sqlite:${other}` });
      const server = await startServer(env);
      cleanups.push(() => server.kill());
      const post = (id: number) => fetch(`${server.base}/plants`, { method: 'POST', headers, body: JSON.stringify({ id, name: `Plant ${id}` }) });
      assert.equal((await post(1)).status, 200);

      if (how === 'removed') for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
      else fs.renameSync(other, file);
      const since = performance.now();
      for (;;) {
        const ready = await fetch(`${server.base}/readyz`);
        const body = await ready.text();
        if (ready.status === 503) {
          assert.equal(errorRecordProblem(503, ready.headers.get('content-type') ?? undefined, body), undefined);
          break;
        }
        assert.ok(performance.now() - since < 2000, `/readyz still ${ready.status} 2 s after the file was ${how}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      t.diagnostic(`/readyz 503 ${Math.round(performance.now() - since)} ms after the database file was ${how}`);
      for (const id of [2, 3, 4]) {
        const response = await post(id);
        assert.equal(response.status, 503, `create ${id} after the file was ${how}`);
        assert.equal(errorRecordProblem(503, response.headers.get('content-type') ?? undefined, await response.text()), undefined);
      }
      const deleted = await fetch(`${server.base}/plants/1`, { method: 'DELETE', headers: { authorization: headers.authorization } });
      assert.equal(deleted.status, 503, 'a delete is refused too');
      // A real file appearing at the path later is not the one SQLite has open: still nothing is acknowledged.
      if (how === 'removed') createToken('late', env);
      assert.equal((await post(5)).status, 503, 'still refused with a new file at the path');
      assert.equal((await fetch(`${server.base}/readyz`)).status, 503);
      assert.equal((await fetch(`${server.base}/healthz`)).status, 200, 'the process is up');

      await server.stop();
      const line = server
        .output()
        .stdout.split('\n')
        .find((logged) => logged.includes(`the SQLite database file ${file} was ${how}`));
      assert.ok(line, `an error line names the file: ${server.output().stdout}`);
      assert.equal((JSON.parse(line) as { level: number }).level, 50, 'at error level');

      // Restarted against the file now at the path, the server serves it.
      const tokenThere = createToken('after-restart', env);
      const restarted = await startServer(env);
      cleanups.push(() => restarted.kill());
      const created = await fetch(`${restarted.base}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokenThere}`, 'content-type': 'application/json' },
        body: '{"id":6,"name":"After"}',
      });
      assert.equal(created.status, 200);
      assert.equal((await fetch(`${restarted.base}/readyz`)).status, 200);
      await restarted.stop();
    });
  }
});
