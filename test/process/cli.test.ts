import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hashToken } from '../../src/auth/tokens.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { CLI, startServer } from '../helpers/process.js';

function cli(args: string[], env: Record<string, string>) {
  const result = spawnSync(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function createPlant(base: string, token: string, body: string) {
  return fetch(`${base}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
  });
}

describe('the plantstore CLI and server process', () => {
  let db: TestDatabase;
  let env: Record<string, string>;

  before(async () => {
    db = await sqliteDatabase();
    env = { DATABASE_URL: db.url };
  });
  after(() => db?.cleanup());

  it('token create prints the token alone on stdout, and only its hash is stored', () => {
    const result = cli(['token', 'create', '--name', 'ops'], env);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^plst_[A-Za-z0-9_-]{43}\n$/);
    assert.match(result.stderr, /shown only this once/);
    const listed = cli(['token', 'list'], env);
    assert.equal(listed.status, 0);
    assert.match(listed.stdout, /^ops\tcreated \d{4}-.*\tlast used never\tscopes plants:read,plants:create,plants:delete\texpires never\n$/);
    assert.ok(!listed.stdout.includes(result.stdout.trim()), 'list never shows a secret');

    // What is on disk: the database file and its write-ahead log hold the token's SHA-256, never its text.
    const token = result.stdout.trim();
    const file = db.url.slice('sqlite:'.length);
    const stored = Buffer.concat([file, `${file}-wal`].filter((path) => existsSync(path)).map((path) => readFileSync(path)));
    assert.ok(stored.includes(hashToken(token)), 'the hash is there, so the files read are the ones written');
    assert.ok(!stored.includes(token), 'the token is not stored');
    assert.ok(!stored.includes(token.slice('plst_'.length)), 'nor its secret part');
    assert.ok(!stored.includes(Buffer.from(token.slice('plst_'.length), 'base64url')), 'nor its random bytes');
  });

  it('refuses a duplicate token name, a missing name, and unknown commands', () => {
    assert.equal(cli(['token', 'create', '--name', 'dup'], env).status, 0);
    const duplicate = cli(['token', 'create', '--name', 'dup'], env);
    assert.equal(duplicate.status, 1);
    assert.equal(duplicate.stdout, '');
    assert.match(duplicate.stderr, /already exists/);
    assert.equal(cli(['token', 'create'], env).status, 2);
    assert.equal(cli(['frobnicate'], env).status, 2);
    assert.equal(cli(['token', 'revoke', 'nobody'], env).status, 1);
  });

  it('token create takes scopes repeated or as a comma list, --read-only, and an expiry printed on stderr only', () => {
    const listed = () => new Map(cli(['token', 'list'], env).stdout.trim().split('\n').map((line) => [line.split('\t')[0], line.split('\t').slice(3)]));
    const made = [
      ['scoped-repeated', ['--scope', 'plants:delete', '--scope', 'plants:read'], 'scopes plants:read,plants:delete'],
      ['scoped-list', ['--scope', ' plants:create , plants:read,plants:create'], 'scopes plants:read,plants:create'],
      ['scoped-read-only', ['--read-only'], 'scopes plants:read'],
    ] as const;
    for (const [name, options] of made) assert.equal(cli(['token', 'create', '--name', name, ...options], env).status, 0, name);
    const before = Date.now();
    const expiring = cli(['token', 'create', '--name', 'scoped-expiring', '--scope', 'plants:read', '--expires-in', '12h'], env);
    assert.equal(expiring.status, 0, expiring.stderr);
    assert.match(expiring.stdout, /^plst_[A-Za-z0-9_-]{43}\n$/, 'stdout is the token alone');
    const printed = /expiring (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)/.exec(expiring.stderr)?.[1];
    assert.ok(printed, expiring.stderr);
    const expiresAt = Date.parse(printed);
    assert.ok(expiresAt >= before + 12 * 3_600_000 && expiresAt <= Date.now() + 12 * 3_600_000 + 1000, printed);
    const tokens = listed();
    for (const [name, , scopes] of made) assert.deepEqual(tokens.get(name), [scopes, 'expires never'], name);
    assert.deepEqual(tokens.get('scoped-expiring'), ['scopes plants:read', `expires ${printed}`]);
  });

  it('refuses unknown scopes, --read-only with --scope, and expiries under a minute or over 366 days: exit 2, nothing created', () => {
    const refusals: Array<[string[], RegExp]> = [
      [['--scope', 'plants:write'], /unknown scope "plants:write"; the scopes are plants:read, plants:create, plants:delete, metrics:read/],
      [['--scope', 'plants:read,'], /unknown scope ""; the scopes are plants:read, plants:create, plants:delete, metrics:read/],
      [['--scope', 'PLANTS:READ'], /unknown scope "PLANTS:READ"/],
      [['--read-only', '--scope', 'plants:delete'], /--read-only or --scope, not both/],
      [['--expires-in', '59s'], /--expires-in takes a duration from 1m to 366d/],
      [['--expires-in', '367d'], /--expires-in takes a duration from 1m to 366d/],
      [['--expires-in', 'tomorrow'], /--expires-in takes a duration from 1m to 366d/],
      [['--expires-in', '999999999d'], /--expires-in takes a duration from 1m to 366d/],
    ];
    for (const [options, message] of refusals) {
      const result = cli(['token', 'create', '--name', 'refused', ...options], env);
      assert.equal(result.status, 2, options.join(' '));
      assert.equal(result.stdout, '');
      assert.match(result.stderr, message);
    }
    assert.equal(cli(['token', 'create', '--name', 'shortest', '--expires-in', '1m'], env).status, 0);
    assert.ok(!cli(['token', 'list'], env).stdout.includes('refused'), 'no refused token was created');
  });

  it('names the variable when configuration is bad, exit 2', () => {
    const result = cli(['token', 'list'], { ...env, PORT: 'abc' });
    assert.equal(result.status, 2);
    assert.match(result.stderr, /PORT: must be a whole number/);
  });

  it('serves, keeps plants across a restart, exits 0 on SIGTERM, and logs JSON without the token', async () => {
    const token = cli(['token', 'create', '--name', 'restart'], env).stdout.trim();
    const first = await startServer({ ...env, LOG_LEVEL: 'debug' });
    const created = await createPlant(first.base, token, '{"id":9223372036854775807,"name":"Old Oak","tag":"tree"}');
    assert.equal(created.status, 200);
    assert.equal((await first.stop('SIGTERM')).code, 0);

    const { stdout } = first.output();
    const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.ok(lines.some((line) => line.msg === 'request completed' && typeof line.reqId === 'string'));
    for (const line of lines) if (line.req || line.res) assert.equal(typeof line.reqId, 'string');
    // Debug lines carry the request headers, with the Authorization header redacted.
    const incoming = lines.find((line) => line.msg === 'incoming request' && (line.req as { method?: string } | undefined)?.method === 'POST');
    const headers = incoming?.headers as Record<string, string> | undefined;
    assert.equal(headers?.authorization, '[redacted]', JSON.stringify(incoming));
    assert.equal(headers?.['content-type'], 'application/json');
    assert.ok(!stdout.includes(token), 'the token never reaches the log');
    assert.ok(!stdout.includes(token.slice(5, 25)), 'not even part of it');

    const second = await startServer(env);
    try {
      const replay = await createPlant(second.base, token, '{"id":9223372036854775807,"name":"Old Oak","tag":"tree"}');
      assert.equal(replay.status, 200);
      const conflict = await createPlant(second.base, token, '{"id":9223372036854775807,"name":"Young Oak","tag":"tree"}');
      assert.equal(conflict.status, 409);
    } finally {
      assert.equal((await second.stop('SIGINT')).code, 0);
    }
  });

  it('tells the operator on stderr how to create a token when none exists, for the database it serves', async () => {
    const empty = await sqliteDatabase();
    try {
      const server = await startServer({ DATABASE_URL: empty.url });
      assert.equal((await server.stop()).code, 0);
      assert.match(server.output().stderr, /no API token exists yet/);
      // A checkout's server (dist/src/cli/plantstore.js) on a file of its own: npx, with that file.
      assert.ok(
        server.output().stderr.includes(`plantstore: create one with:  DATABASE_URL=${empty.url} npx plantstore token create --name <name>\n`),
        server.output().stderr,
      );
    } finally {
      await empty.cleanup();
    }
  });

  it("gives an installed plantstore's hint its own bin path, which works from any folder", async () => {
    const empty = await sqliteDatabase();
    const prefix = mkdtempSync(path.join(os.tmpdir(), 'plantstore-bin-'));
    try {
      // What npm install -g --prefix PREFIX makes: PREFIX/bin/plantstore, a link to the CLI.
      const bin = path.join(prefix, 'bin', 'plantstore');
      mkdirSync(path.dirname(bin));
      symlinkSync(CLI, bin);
      const server = await startServer({ DATABASE_URL: empty.url }, { nodeArgs: [bin, 'serve'] });
      assert.equal((await server.stop()).code, 0);
      assert.ok(
        server.output().stderr.includes(`plantstore: create one with:  DATABASE_URL=${empty.url} ${bin} token create --name <name>\n`),
        server.output().stderr,
      );
    } finally {
      rmSync(prefix, { recursive: true, force: true });
      await empty.cleanup();
    }
  });

  it('token revoke makes a running server refuse the token within seconds, without a restart', async () => {
    const token = cli(['token', 'create', '--name', 'soon-revoked'], env).stdout.trim();
    const server = await startServer(env);
    try {
      assert.equal((await createPlant(server.base, token, '{"id":1,"name":"a"}')).status, 200);
      assert.equal(cli(['token', 'revoke', 'soon-revoked'], env).status, 0);
      let status = 0;
      for (let waited = 0; waited < 3000; waited += 100) {
        status = (await createPlant(server.base, token, '{"id":1,"name":"a"}')).status;
        if (status === 401) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.equal(status, 401);
    } finally {
      await server.stop();
    }
  });
});
