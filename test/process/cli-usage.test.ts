/**
 * How the `plantstore` command answers before it does any work: `--version`, `<command> --help`, usage errors, and
 * the runtime check that stops an unsupported Node.js before anything else is loaded. Real processes through the
 * built `bin`, since what is tested is what a terminal shows and the exit code.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { minimumNode, unsupportedNodeMessage } from '../../src/cli/package-info.js';
import { located, olderNode, skipWithout } from '../helpers/prerequisites.js';
import { CLI } from '../helpers/process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const PACKAGE = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string; engines: { node: string } };

/** Every command's first word, as `plantstore --help` lists them. */
const COMMANDS = ['serve', 'migrate', 'token', 'plants', 'backup', 'restore', 'export', 'import', 'push', 'copy', 'webhook', 'version'];

/** The commands that open no database: their --help says so rather than naming DATABASE_URL. */
const WITHOUT_DATABASE = new Set(['push', 'version']);

/**
 * A Node.js older than engines.node: OLD_NODE, else the system's /usr/bin/node (Node 20 on the machines this runs
 * on). When neither is older the suite that needs one is skipped, saying how to get one, or fails where CI is set.
 */
const OLD_NODE = olderNode();

let dir: string;
let env: Record<string, string>;
let database: string;

function cli(args: string[], options: { node?: string; extraEnv?: Record<string, string> } = {}) {
  const result = spawnSync(options.node ?? process.execPath, [CLI, ...args], {
    env: { ...process.env, ...env, ...options.extraEnv },
    cwd: dir,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr };
}

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-cli-usage-'));
  database = path.join(dir, 'data', 'plants.db');
  env = { DATABASE_URL: 'sqlite:./data/plants.db', LOG_LEVEL: 'warn' };
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('plantstore --version', () => {
  for (const args of [['--version'], ['version']]) {
    it(`plantstore ${args.join(' ')} prints "plantstore ${PACKAGE.version}" on stdout, exit 0`, () => {
      const result = cli(args, { extraEnv: { PORT: 'not a port' } });
      assert.deepEqual({ status: result.status, stdout: result.stdout, stderr: result.stderr }, { status: 0, stdout: `plantstore ${PACKAGE.version}\n`, stderr: '' });
    });
  }
});

describe('plantstore <command> --help', () => {
  let full: ReturnType<typeof cli>;
  before(() => {
    full = cli(['--help']);
  });

  it('plantstore --help lists every command, exit 0', () => {
    assert.equal(full.status, 0, full.stderr);
    for (const name of COMMANDS) assert.match(full.stdout, new RegExp(`^  ${name}\\b`, 'm'), name);
  });

  for (const name of COMMANDS) {
    it(`plantstore ${name} --help prints that command's usage alone, exit 0, touching no database`, () => {
      const result = cli([name, '--help']);
      assert.equal(result.status, 0, result.stderr);
      assert.equal(result.stderr, '');
      assert.match(result.stdout, /^Usage:\n/);
      const listed = result.stdout.split('\n').filter((line) => /^ {2}\S/.test(line));
      assert.ok(listed.length > 0, result.stdout);
      for (const line of listed) {
        assert.ok(line.startsWith(`  ${name}`), `only ${name}'s lines: ${line}`);
        assert.ok(full.stdout.includes(line), `the same line as in plantstore --help: ${line}`);
      }
      assert.equal(fs.existsSync(path.dirname(database)), false, 'no database folder was made');
      if (WITHOUT_DATABASE.has(name)) {
        assert.match(result.stdout, new RegExp(`^${name} opens no database: DATABASE_URL is not used\\.`, 'm'));
        assert.doesNotMatch(result.stdout, /reads DATABASE_URL/);
      } else {
        assert.match(result.stdout, new RegExp(`^${name} reads DATABASE_URL \\(default `, 'm'));
      }
    });
  }

  it('plantstore --help says which commands read DATABASE_URL', () => {
    assert.match(full.stdout, /^Every command but push, watch and version reads DATABASE_URL \(default /m);
  });

  it('an action\'s --help is its command\'s usage (plantstore token create --help)', () => {
    const result = cli(['token', 'create', '--help']);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^ {2}token create --name NAME/m);
  });
});

describe('usage errors', () => {
  const cases: ReadonlyArray<readonly [args: string[], message: RegExp, help: string]> = [
    [['token', 'create'], /^plantstore: token create needs --name NAME/, 'plantstore token --help'],
    [['token', 'frobnicate'], /^plantstore: unknown token command "frobnicate"$/, 'plantstore token --help'],
    [['plants', 'list', '--limit', '0'], /^plantstore: plants list --limit needs a positive integer$/, 'plantstore plants --help'],
    [['export', '--nope'], /^plantstore: Unknown option '--nope'/, 'plantstore export --help'],
    // A near miss of an option the command's usage lists is answered with that option.
    [['token', 'create', '--nmae', 'ops'], /^plantstore: unknown option '--nmae'; did you mean --name\?$/, 'plantstore token --help'],
    [['push', 'plants.jsonl', '--url', 'http://127.0.0.1:1', '--tokenfile', 't'], /^plantstore: unknown option '--tokenfile'; did you mean --token-file\?$/, 'plantstore push --help'],
    [['export', '--tga', 'x'], /^plantstore: unknown option '--tga'; did you mean --tag\?$/, 'plantstore export --help'],
    [['backup'], /^plantstore: backup needs exactly one FILE$/, 'plantstore backup --help'],
    [['webhook', 'add'], /^plantstore: webhook add needs --url URL$/, 'plantstore webhook --help'],
    [['serve', 'now'], /^plantstore: serve takes no arguments/, 'plantstore serve --help'],
    [['frobnicate'], /^plantstore: unknown command "frobnicate"$/, 'plantstore --help'],
  ];
  for (const [args, message, help] of cases) {
    it(`plantstore ${args.join(' ')}: its line, then where the usage is; exit 2`, () => {
      const result = cli(args);
      assert.equal(result.status, 2, result.stderr);
      assert.equal(result.stdout, '');
      const lines = result.stderr.replace(/\n$/, '').split('\n');
      assert.ok(lines.length <= 3, `at most 3 lines: ${result.stderr}`);
      assert.match(lines[0] as string, message);
      assert.equal(lines.at(-1), `run '${help}' for usage`);
      assert.equal(fs.existsSync(path.dirname(database)), false, 'no database folder was made');
    });
  }
});

describe(`on a Node.js older than engines.node (${PACKAGE.engines.node})`, { skip: skipWithout(OLD_NODE) }, () => {
  /** Every entry through the bin: each command, the bounded-heap ones (export, import, copy) included. */
  const entries: string[][] = [
    ['serve'],
    ['migrate'],
    ['token', 'create', '--name', 'ops'],
    ['token', 'list'],
    ['plants', 'list'],
    ['backup', 'copy.db'],
    ['restore', 'copy.db'],
    ['export'],
    ['import', '--dry-run'],
    ['copy', '--to', 'sqlite:./other.db'],
    ['webhook', 'list'],
    ['version'],
    ['--version'],
    ['--help'],
    [],
  ];

  it(`OLD_NODE (or /usr/bin/node) is older than ${PACKAGE.engines.node}`, () => {
    const oldNode = located(OLD_NODE);
    const version = spawnSync(oldNode, ['--version'], { encoding: 'utf8' }).stdout.trim();
    assert.ok(unsupportedNodeMessage(version, PACKAGE.engines.node) !== undefined, `${oldNode} is ${version}`);
  });

  for (const args of entries) {
    // Exiting "at once" is what the status shows: a command that went on to serve would be ended by cli()'s timeout.
    it(`plantstore ${args.join(' ')} exits 1 at once with one line naming both releases, creating nothing`, () => {
      const oldNode = located(OLD_NODE);
      const version = spawnSync(oldNode, ['--version'], { encoding: 'utf8' }).stdout.trim();
      const result = cli(args, { node: oldNode });
      assert.deepEqual(
        { status: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr },
        { status: 1, signal: null, stdout: '', stderr: `plantstore needs Node.js ${minimumNode(PACKAGE.engines.node).label} or later; this is ${version}\n` },
      );
      assert.equal(fs.existsSync(path.dirname(database)), false, 'no database folder was made');
    });
  }
});
