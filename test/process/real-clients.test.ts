/**
 * What the HTTP clients people use see of a server in its default configuration, one client alone, creating from one
 * address at 100 and at 1,000 at once, each client in a process of its own (test/helpers/clients.ts): every create
 * answered 2xx, none without an answer. The rates and latencies they get are bench/clients.ts's (docs/connections.md).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CLIENT_KINDS, ClientWorkspace, prerequisitesOf } from '../helpers/clients.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { skipWithout } from '../helpers/prerequisites.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

describe('real HTTP clients, one alone on a server with defaults, creating from one address', { timeout: 180_000 }, () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let token: string;
  const workspace = new ClientWorkspace();
  let firstId = 1n;

  before(async () => {
    db = await sqliteDatabase();
    const env = { DATABASE_URL: db.url };
    token = createToken('clients', env);
    server = await startServer(env);
  });
  after(async () => {
    await server?.kill();
    await db?.cleanup();
    workspace.cleanup();
  });

  for (const kind of CLIENT_KINDS) {
    for (const concurrency of [100, 1000]) {
      it(`${kind} at ${concurrency} concurrent creates: every one answered 2xx, none without an answer`, { skip: skipWithout(...prerequisitesOf(kind)) }, async (t) => {
        const total = concurrency * 2;
        const summary = await workspace.run(kind, { base: server.base, token, concurrency, total, firstId });
        firstId += BigInt(total);
        t.diagnostic(`${summary.sent} sent, ${summary.ok} 2xx in ${summary.elapsedMs.toFixed(0)} ms; statuses ${JSON.stringify(summary.statuses)}, errors ${JSON.stringify(summary.errors)}`);
        assert.deepEqual(summary.errors, {}, 'no transport errors');
        assert.deepEqual(summary.statuses, {}, 'no answer other than 2xx');
        assert.equal(summary.ok, total);
      });
    }
  }
});
