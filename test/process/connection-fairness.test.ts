/**
 * Overload degrades fairly (issue 37): one client address cannot take the instance's connections from another, and a
 * legitimate client with a connection per request is answered on every one of them, a 200 or a 503 with Retry-After,
 * never reset. Counts are asserted, not times: the latencies are bench/connection-fairness.ts's (docs/connections.md).
 * Clients are bound to loopback addresses of their own (127.0.0.2 …).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { concurrentCreates, holdSockets, probe, type Answers, type HoldMode } from '../helpers/fair-share.js';
import { rssMiB } from '../helpers/flood.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

/** Every request answered: a 200 or a refusal with Retry-After, none a socket error; the counts for the diagnostics. */
function assertAllAnswered(answers: Answers, count: number): string {
  const answered = [...answers.statuses.values()].reduce((sum, n) => sum + n, 0);
  const summary = `statuses ${JSON.stringify(Object.fromEntries(answers.statuses))}, socket errors ${JSON.stringify(Object.fromEntries(answers.socketErrors))}`;
  assert.deepEqual(Object.fromEntries(answers.socketErrors), {}, `no request is left without an answer: ${summary}`);
  assert.equal(answered, count, summary);
  assert.deepEqual(answers.unexplained.slice(0, 5), [], 'every answer is a 200 or an Error record with Retry-After');
  return summary;
}

describe('connections shared fairly among client addresses, against a real server', { timeout: 240_000 }, () => {
  const dbs: TestDatabase[] = [];
  const servers: ServerProcess[] = [];
  after(async () => {
    for (const server of servers) await server.kill();
    for (const db of dbs) await db.cleanup();
  });
  const serve = async (env: Record<string, string>) => {
    const db = await sqliteDatabase();
    dbs.push(db);
    const withDatabase = { DATABASE_URL: db.url, ...env };
    const token = createToken('fair', withDatabase);
    const server = await startServer(withDatabase);
    servers.push(server);
    return { server, token };
  };

  it('1,000 creates at once from one address, a connection each, defaults: 1,000 answers, none a socket error', async (t) => {
    const { server, token } = await serve({});
    const pid = server.child.pid as number;
    const before = rssMiB(pid);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 50);
    try {
      const answers = await concurrentCreates(server.base, token, { count: 1000, localAddress: '127.0.0.2', firstId: 1n });
      t.diagnostic(`${assertAllAnswered(answers, 1000)}; RSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB`);
    } finally {
      clearInterval(sampler);
    }
  });

  it('1,000 creates at once from one address past a small instance and queue (16 served, 500 waiting): each a 200 or a 503 with Retry-After, none a socket error', async (t) => {
    // The sockets the server holds at once (served, waiting, and refused while they read their answer) stay under its
    // hard ceiling, twice the two limits together: past it Node closes a socket unanswered.
    const { server, token } = await serve({ MAX_CONNECTIONS: '16', MAX_QUEUED_CONNECTIONS: '500' });
    const answers = await concurrentCreates(server.base, token, { count: 1000, localAddress: '127.0.0.2', firstId: 1n });
    t.diagnostic(assertAllAnswered(answers, 1000));
  });

  for (const mode of ['idle', 'slowloris', 'keep-alive'] as HoldMode[]) {
    it(`an attacker holding more ${mode} connections than the instance serves, each reopened at once: /healthz and creates from another address all succeed`, async (t) => {
      const instance = 8;
      const { server, token } = await serve({ MAX_CONNECTIONS: String(instance) });
      const attacker = holdSockets(server.port, { count: 2 * instance, localAddress: '127.0.0.2', mode });
      try {
        // The attacker fills the instance and starts waiting before the first probe.
        await new Promise((resolve) => setTimeout(resolve, 500));
        const results = await probe(server.base, token, { count: 20, localAddress: '127.0.0.3', gapMs: 50, timeoutMs: 30_000, firstId: 1n });
        t.diagnostic(`attacker opened ${attacker.opened()} connections; probes: ${JSON.stringify(results.healthz.map((r) => r.status))} ${JSON.stringify(results.creates.map((r) => r.status))}`);
        assert.deepEqual(new Set(results.healthz.map((result) => result.status)), new Set([200]), 'every /healthz answered 200');
        assert.deepEqual(new Set(results.creates.map((result) => result.status)), new Set([200]), 'every create answered 200');
      } finally {
        attacker.stop();
      }
    });
  }
});
