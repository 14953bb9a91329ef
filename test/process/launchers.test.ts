/**
 * The server as the README starts it inside a checkout: `npm start` and `npx plantstore serve`, in the background,
 * each a real process tree (npm, its script shell, node). A SIGTERM or SIGINT to the PID the shell reports ($!)
 * must stop the server as SIGTERM to the server does, and so must Ctrl-C (SIGINT to the whole foreground group).
 * And `npx plantstore` must keep working after every rebuild.
 *
 * It runs in a copy of the checkout (its sources and npm settings, built by its own `npm run build`, the
 * dependencies linked), with its own HOME and npm cache, so npx's cache and the build it triggers stay in the
 * test's temporary folder.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { minimumNode } from '../../src/cli/package-info.js';
import { assertStopsCleanly, killGroup, launch, waitUntilServing, withoutNpmVariables, type Launched } from '../helpers/launched-server.js';
import { located, olderNode, skipWithout } from '../helpers/prerequisites.js';
import { freePort } from '../helpers/process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const { version, bin, engines } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  bin: { plantstore: string };
  engines: { node: string };
};

let dir: string;
let checkout: string;
let env: Record<string, string>;

function run(command: string, args: readonly string[], extraEnv: Record<string, string> = {}) {
  const result = spawnSync(command, args, { cwd: checkout, env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: 300_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function runOk(command: string, args: readonly string[], extraEnv: Record<string, string> = {}): string {
  const result = run(command, args, extraEnv);
  assert.equal(result.status, 0, `${command} ${args.join(' ')}: ${result.stderr}`);
  return result.stdout;
}

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-launchers-'));
  checkout = path.join(dir, 'plantstore');
  fs.mkdirSync(checkout);
  for (const entry of ['package.json', 'package-lock.json', '.npmrc', 'tsconfig.json', 'tsconfig.client.json', 'src']) {
    fs.cpSync(path.join(ROOT, entry), path.join(checkout, entry), { recursive: true });
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules'));
  const home = path.join(dir, 'home');
  fs.mkdirSync(home);
  env = {
    ...withoutNpmVariables(process.env),
    // This Node first, as the README's recipe puts it first; npm is whichever is on the PATH.
    PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
    HOME: home,
    npm_config_cache: path.join(dir, 'npm-cache'),
    npm_config_update_notifier: 'false',
    LOG_LEVEL: 'info',
    DATABASE_URL: `sqlite:${path.join(dir, 'plants.db')}`,
  };
  runOk('npm', ['run', 'build']);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('npx plantstore in a checkout', () => {
  it('works after the build, and after every rebuild: the build makes the bin executable itself', () => {
    const binFile = path.join(checkout, bin.plantstore);
    assert.equal(fs.statSync(binFile).mode & 0o111, 0o111, `${bin.plantstore} is executable after npm run build`);
    // The first npx links the checkout into npx's cache (node_modules/.bin/plantstore there), making the bin
    // executable as it links; later runs use that link as it is.
    assert.equal(runOk('npx', ['plantstore', '--version']), `plantstore ${version}\n`);
    const links = fs
      .readdirSync(path.join(dir, 'npm-cache', '_npx'))
      .map((entry) => path.join(dir, 'npm-cache', '_npx', entry, 'node_modules', '.bin', 'plantstore'))
      .filter((link) => fs.existsSync(link));
    assert.equal(links.length, 1, "npx's cache holds one node_modules/.bin/plantstore");
    for (const rebuild of [['run', 'build'], ['run', 'prepare']]) {
      runOk('npm', rebuild);
      assert.equal(fs.statSync(binFile).mode & 0o111, 0o111, `executable after npm ${rebuild.join(' ')}`);
      assert.equal(runOk('npx', ['plantstore', '--version']), `plantstore ${version}\n`, `npx after npm ${rebuild.join(' ')}`);
      assert.equal(runOk(links[0] as string, ['--version']), `plantstore ${version}\n`, `node_modules/.bin/plantstore after npm ${rebuild.join(' ')}`);
    }
  });
});

describe('on a Node.js older than engines.node, first on the PATH (a terminal the README recipe did not reach)', { skip: skipWithout(olderNode()) }, () => {
  /** As in cli-usage.test.ts: OLD_NODE, else the system's Node 20. */
  const older = olderNode();
  // npx links the checkout into its cache on first use, and that install is what npm itself refuses on an older Node
  // (EBADENGINE, engine-strict in .npmrc); linked once, as in any checkout where npx ran before, it runs the bin.
  before(() => runOk('npx', ['plantstore', '--version']));
  for (const entry of [
    ['npm', 'start'],
    ['npx', 'plantstore', 'token', 'create', '--name', 'old'],
    ['npx', 'plantstore', '--version'],
  ]) {
    it(`${entry.join(' ')} exits 1 with one line naming both releases, and no server or database appears`, () => {
      const oldNode = located(older);
      const running = spawnSync(oldNode, ['--version'], { encoding: 'utf8' }).stdout.trim();
      const database = path.join(dir, 'old-node', 'plants.db');
      const result = run(entry[0] as string, entry.slice(1), {
        PATH: `${path.dirname(oldNode)}${path.delimiter}${env.PATH}`,
        DATABASE_URL: `sqlite:${database}`,
      });
      assert.equal(result.status, 1, result.stderr);
      // npm's own lines (its script banner, a warning) may surround it; plantstore says this one line only.
      const ours = result.stderr.split('\n').filter((line) => !/^npm (warn|notice|error)|^$/.test(line));
      assert.deepEqual(ours, [`plantstore needs Node.js ${minimumNode(engines.node).label} or later; this is ${running}`], result.stderr);
      assert.ok(!/Segmentation|core dumped/i.test(result.stderr + result.stdout));
      assert.equal(fs.existsSync(path.dirname(database)), false, 'no database folder was made');
    });
  }
});

for (const launcher of [
  { name: 'npm start', command: 'npm', args: ['start'] },
  { name: 'npx plantstore serve', command: 'npx', args: ['plantstore', 'serve'] },
]) {
  describe(`${launcher.name} in the background`, () => {
    let token: string;
    let nextId = 1;
    before(() => {
      token = runOk(process.execPath, [path.join(checkout, bin.plantstore), 'token', 'create', '--name', `t${Math.random().toString(36).slice(2)}`]).trim();
    });

    const cases: ReadonlyArray<{ title: string; signal: NodeJS.Signals; toGroup: boolean }> = [
      { title: `SIGTERM to the PID of ${launcher.name}`, signal: 'SIGTERM', toGroup: false },
      { title: `SIGINT to the PID of ${launcher.name}`, signal: 'SIGINT', toGroup: false },
      { title: `Ctrl-C (SIGINT to the process group of ${launcher.name})`, signal: 'SIGINT', toGroup: true },
    ];
    for (const { title, signal, toGroup } of cases) {
      it(`${title} stops the server as SIGTERM does: in-flight requests answered, exit 0, port free, nothing left`, async () => {
        const port = await freePort();
        let launched: Launched | undefined;
        try {
          launched = launch(launcher.command, launcher.args, { cwd: checkout, env: { ...env, PORT: String(port), HOST: '127.0.0.1' } });
          await waitUntilServing(launched, port);
          const ids = [nextId, nextId + 1, nextId + 2];
          nextId += 3;
          await assertStopsCleanly({ launched, port, token, signal, toGroup, ids });
          const listed = runOk(process.execPath, [path.join(checkout, bin.plantstore), 'plants', 'list']);
          for (const id of ids) assert.ok(listed.includes(`{"id":${id},"name":"in flight ${id}"}`), `plant ${id} is stored: ${listed}`);
        } finally {
          if (launched) killGroup(launched);
        }
      });
    }
  });
}
