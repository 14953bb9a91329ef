/**
 * The errors an operator meets when a file, folder or URL given on the command line cannot be used: each names the
 * argument or option it came from, the path or address, and what to do, never Node's bare error code or a temporary
 * file of the command's own. Real processes through the built `bin`, since the line on stderr and the exit code are
 * what is tested.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../helpers/process.js';
import { plantstore, type CliResult } from '../helpers/transfer.js';

let dir: string;
let env: Record<string, string>;
let plants: string;
let tokenFile: string;

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-cli-errors-'));
  env = { DATABASE_URL: `sqlite:${path.join(dir, 'plants.db')}`, LOG_LEVEL: 'warn' };
  plants = path.join(dir, 'plants.jsonl');
  fs.writeFileSync(plants, '{"id":1,"name":"Fern"}\n');
  tokenFile = path.join(dir, 'token');
  // Never sent anywhere: every push below fails before or at connecting.
  fs.writeFileSync(tokenFile, 'not-a-real-token\n', { mode: 0o600 });
  const migrated = plantstore(['migrate'], env);
  assert.equal(migrated.status, 0, migrated.stderr);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Exit 1 and exactly one line on stderr, nothing on stdout, and none of Node's raw error words in it. */
function assertOneLineFailure(result: CliResult, expected: string): void {
  assert.equal(result.stdout, '');
  assert.equal(result.stderr, `plantstore: ${expected}\n`);
  assert.equal(result.status, 1, result.stderr);
  assert.doesNotMatch(result.stderr, /ENOENT|EISDIR|ECONNREFUSED|\.partial-/);
}

describe('push', () => {
  const tokenFix = 'give a file holding a token with the plants:create scope (plantstore token create --name NAME --scope plants:create > FILE)';

  it('a --token-file that is not there: names the option and the file, and how to make one', () => {
    const missing = path.join(dir, 'no-token');
    assertOneLineFailure(
      plantstore(['push', plants, '--url', 'http://127.0.0.1:1', '--token-file', missing], env),
      `push --token-file ${missing}: there is no such file; ${tokenFix}`,
    );
  });

  it('an empty --token-file: the same, saying it is empty', () => {
    const empty = path.join(dir, 'empty-token');
    fs.writeFileSync(empty, '\n');
    assertOneLineFailure(
      plantstore(['push', plants, '--url', 'http://127.0.0.1:1', '--token-file', empty], env),
      `push --token-file ${empty}: the file is empty; ${tokenFix}`,
    );
  });

  it('a FILE that is not there: names FILE, before any connection is tried', () => {
    const missing = path.join(dir, 'no-plants.jsonl');
    assertOneLineFailure(
      plantstore(['push', missing, '--url', 'http://127.0.0.1:1', '--token-file', tokenFile], env),
      `push FILE ${missing}: there is no such file; name a file of NewPlant JSON lines, or - for standard input`,
    );
  });

  it('a --url where nothing listens: names the option and the address, and says to start the server or correct it', async () => {
    // A port just freed on loopback: nothing listens there.
    const url = `http://127.0.0.1:${await freePort()}`;
    assertOneLineFailure(
      plantstore(['push', plants, '--url', url, '--token-file', tokenFile], env),
      `push --url ${url}: nothing listens at ${new URL(url).host} (connection refused); start the server there (plantstore serve) or correct --url`,
    );
  });
});

describe('backup and export into a folder that is not there', () => {
  it('backup FILE in a missing folder: names that folder, not a temporary file, and writes nothing', () => {
    const folder = path.join(dir, 'backups');
    const file = path.join(folder, 'plants.db');
    assertOneLineFailure(
      plantstore(['backup', file], env),
      `backup FILE ${file}: the folder ${folder} does not exist; create it first (mkdir -p '${folder}') or name a file in a folder that exists`,
    );
    assert.equal(fs.existsSync(folder), false);
    // Done as the message says, the backup succeeds.
    fs.mkdirSync(folder);
    const done = plantstore(['backup', file], env);
    assert.equal(done.status, 0, done.stderr);
  });

  it('backup FILE that is a folder: says so', () => {
    assertOneLineFailure(plantstore(['backup', dir], env), `backup FILE ${dir}: it is a folder; name a file inside it`);
  });

  it('export --out in a missing folder: names the option and the folder', () => {
    const folder = path.join(dir, 'exports');
    const file = path.join(folder, 'plants.jsonl');
    assertOneLineFailure(
      plantstore(['export', '--out', file], env),
      `export --out ${file}: the folder ${folder} does not exist; create it first (mkdir -p '${folder}') or name a file in a folder that exists`,
    );
  });

  it('import FILE that is a folder: says so', () => {
    assertOneLineFailure(
      plantstore(['import', dir], env),
      `import FILE ${dir}: it is a folder, not a file; name a file of NewPlant JSON lines, or - for standard input`,
    );
  });
});
