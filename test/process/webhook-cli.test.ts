/**
 * `plantstore webhook …` as an operator runs it: a real CLI process on each store. The secret is printed alone on
 * stdout, once, by add and rotate-secret, and nowhere else; everything else goes to stderr.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { DATABASES, type TestDatabase } from '../helpers/databases.js';
import { CLI } from '../helpers/process.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

function cli(args: string[], env: Record<string, string>) {
  const result = spawnSync(process.execPath, [CLI, 'webhook', ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const SECRET = /^whsec_([A-Za-z0-9+/]+={0,2})\n$/;

for (const { kind, create } of DATABASES) {
  describe(`plantstore webhook on ${kind}`, () => {
    let db: TestDatabase;
    let env: Record<string, string>;

    before(async () => {
      db = await create();
      env = { DATABASE_URL: db.url, LOG_LEVEL: 'warn' };
    });
    after(() => db?.cleanup());

    it('add prints a whsec_ secret of at least 24 random bytes alone on stdout, once; list never shows it', () => {
      const added = cli(['add', '--url', 'https://hooks.example.com/plants', '--name', 'shop'], env);
      assert.equal(added.status, 0, added.stderr);
      const match = SECRET.exec(added.stdout);
      assert.ok(match, `stdout is the secret alone: ${JSON.stringify(added.stdout)}`);
      assert.ok(Buffer.from(match[1] as string, 'base64').length >= 24);
      assert.match(added.stderr, /shown only this once/);

      const listed = cli(['list'], env);
      assert.equal(listed.status, 0, listed.stderr);
      assert.match(
        listed.stdout,
        /^shop\thttps:\/\/hooks\.example\.com\/plants\tactive\tcreated \d{4}-[^\t]+\tlast success never\tlast failure never\twaiting 0\tdelivered 0\tretried 0\tfailed 0\n$/,
      );
      const secret = added.stdout.trim();
      assert.ok(!listed.stdout.includes(secret) && !listed.stderr.includes(secret), 'list never shows a secret');
      assert.ok(!listed.stdout.includes(secret.slice('whsec_'.length)));

      const duplicate = cli(['add', '--url', 'https://other.example.com/', '--name', 'shop'], env);
      assert.equal(duplicate.status, 1);
      assert.equal(duplicate.stdout, '');
      assert.match(duplicate.stderr, /already exists/);
    });

    it('names a subscription after its host by default', () => {
      const added = cli(['add', '--url', 'https://index.example.org:8443/hook'], env);
      assert.equal(added.status, 0, added.stderr);
      assert.match(cli(['list'], env).stdout, /^index\.example\.org-8443\t/m);
    });

    it('refuses private, loopback and link-local URLs and other schemes unless private networks are allowed (exit 2)', () => {
      for (const url of [
        'http://127.0.0.1:8080/',
        'http://localhost/',
        'http://10.1.2.3/',
        'http://192.168.0.10/',
        'http://169.254.169.254/latest/meta-data/',
        'http://[::1]/',
        'http://[fd00::1]/',
        'http://0.0.0.0/',
        'ftp://example.com/',
        'https://user:pass@example.com/',
        'not a url',
      ]) {
        const refused = cli(['add', '--url', url, '--name', 'bad'], env);
        assert.equal(refused.status, 2, `${url}: ${refused.stderr}`);
        assert.equal(refused.stdout, '');
      }
      const allowed = cli(['add', '--url', 'http://127.0.0.1:8080/', '--name', 'internal'], { ...env, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
      assert.equal(allowed.status, 0, allowed.stderr);
    });

    it('disable and enable, with the state and its reason in list', () => {
      assert.equal(cli(['disable', 'internal'], env).status, 0);
      assert.match(cli(['list'], env).stdout, /^internal\thttp:\/\/127\.0\.0\.1:8080\/\tdisabled since [^\t]+: disabled by the operator\t/m);
      assert.equal(cli(['enable', 'internal'], env).status, 0);
      assert.match(cli(['list'], env).stdout, /^internal\t[^\t]+\tactive\t/m);
      assert.equal(cli(['disable', 'nobody'], env).status, 1);
      assert.equal(cli(['enable', 'nobody'], env).status, 1);
    });

    it('rotate-secret prints a new secret alone on stdout; remove deletes; unknown names and ids exit 1', () => {
      const first = cli(['add', '--url', 'https://rot.example.com/', '--name', 'rot'], env).stdout;
      const rotated = cli(['rotate-secret', 'rot'], env);
      assert.equal(rotated.status, 0, rotated.stderr);
      assert.match(rotated.stdout, SECRET);
      assert.notEqual(rotated.stdout, first);
      assert.match(rotated.stderr, /both the new and the previous secret/);
      assert.equal(cli(['rotate-secret', 'nobody'], env).status, 1);

      assert.equal(cli(['remove', 'rot'], env).status, 0);
      assert.doesNotMatch(cli(['list'], env).stdout, /^rot\t/m);
      assert.equal(cli(['remove', 'rot'], env).status, 1);

      const deliveries = cli(['deliveries'], env);
      assert.equal(deliveries.status, 0);
      assert.equal(deliveries.stdout, '');
      assert.equal(cli(['deliveries', '--failed', 'shop', '--limit', '5'], env).status, 0);
      assert.equal(cli(['redeliver', 'msg_0123456789ab_1'], env).status, 1);
      assert.equal(cli(['redeliver', 'garbage'], env).status, 1);
      assert.equal(cli(['redeliver'], env).status, 2);
      assert.equal(cli(['frobnicate'], env).status, 2);
      assert.equal(cli(['add'], env).status, 2);
    });
  });
}
