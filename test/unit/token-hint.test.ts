/**
 * The hint `serve` prints when no token exists (src/auth/token-hint.ts): the command is the one that reaches this
 * server's database from wherever the operator runs it, and it never prints a password.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { noTokenMessage, plantstoreCommand } from '../../src/auth/token-hint.js';

const FIRST_LINE = 'plantstore: no API token exists yet, so every request to /plants will be refused with 401.\n';

/** The suggested command alone (the second line), for the cases below. */
function suggested(...args: Parameters<typeof noTokenMessage>): string {
  const text = noTokenMessage(...args);
  assert.ok(text.startsWith(FIRST_LINE), text);
  const line = text.split('\n')[1] ?? '';
  const prefix = 'plantstore: create one with:  ';
  assert.ok(line.startsWith(prefix), line);
  return line.slice(prefix.length);
}

describe('the no-token hint', () => {
  it("keeps the checkout's npx form, and names no database when the checkout serves its default file", () => {
    const checkout = '/home/ana/plantstore';
    const database = { kind: 'sqlite', path: `${checkout}/data/plantstore.db` } as const;
    for (const script of [`${checkout}/dist/src/cli/plantstore.js`, '/root/.npm/_npx/6547fd3e3d74c5c3/node_modules/.bin/plantstore', undefined]) {
      assert.equal(suggested(database, script, checkout), 'npx plantstore token create --name <name>');
    }
  });

  it('names the SQLite file by its absolute path when the checkout serves another', () => {
    const database = { kind: 'sqlite', path: '/srv/plants/store.db' } as const;
    assert.equal(
      suggested(database, '/home/ana/plantstore/dist/src/cli/plantstore.js', '/home/ana/plantstore'),
      'DATABASE_URL=sqlite:/srv/plants/store.db npx plantstore token create --name <name>',
    );
  });

  it('gives an installed plantstore its own bin path and the absolute database file, default or not', () => {
    assert.equal(
      suggested({ kind: 'sqlite', path: '/var/lib/plantstore/plantstore.db' }, '/opt/plantstore/bin/plantstore', '/var/lib/plantstore'),
      'DATABASE_URL=sqlite:/var/lib/plantstore/plantstore.db /opt/plantstore/bin/plantstore token create --name <name>',
    );
    // The default file of a server started in /home/ana/shop: from any other folder, the default would be another file.
    assert.equal(
      suggested({ kind: 'sqlite', path: '/home/ana/shop/data/plantstore.db' }, '/usr/local/bin/plantstore', '/home/ana/shop'),
      'DATABASE_URL=sqlite:/home/ana/shop/data/plantstore.db /usr/local/bin/plantstore token create --name <name>',
    );
  });

  it("runs an installed package's CLI file with node, and quotes what the shell would split", () => {
    const script = '/opt/plant store/lib/node_modules/plantstore/dist/src/cli/plantstore.js';
    assert.equal(plantstoreCommand(script), `node '${script}'`);
    assert.equal(
      suggested({ kind: 'sqlite', path: "/data/ana's plants.db" }, '/opt/plant store/bin/plantstore', '/'),
      `DATABASE_URL='sqlite:/data/ana'\\''s plants.db' '/opt/plant store/bin/plantstore' token create --name <name>`,
    );
  });

  it('names the PostgreSQL database without its password, and says what stands in for it', () => {
    const secret = 's3cr&t';
    const text = noTokenMessage(
      { kind: 'postgres', url: `postgres://plantstore:${encodeURIComponent(secret)}@db.internal:5432/plantstore?sslmode=verify-full&sslpassword=${encodeURIComponent(secret)}`, poolSize: 10 },
      '/opt/plantstore/bin/plantstore',
      '/',
    );
    assert.ok(!text.includes('s3cr'), text);
    assert.equal(
      text.split('\n')[1],
      "plantstore: create one with:  DATABASE_URL='postgres://plantstore:PASSWORD@db.internal:5432/plantstore?sslmode=verify-full&sslpassword=PASSWORD' /opt/plantstore/bin/plantstore token create --name <name>",
    );
    assert.match(text, /PASSWORD stands for the password in the server's DATABASE_URL\)\n$/);
    // Without a password there is nothing to stand in for.
    const open = noTokenMessage({ kind: 'postgres', url: 'postgres://plantstore@db.internal/plantstore', poolSize: 10 }, undefined, '/');
    assert.equal(open, `${FIRST_LINE}plantstore: create one with:  DATABASE_URL=postgres://plantstore@db.internal/plantstore npx plantstore token create --name <name>\n`);
  });
});
