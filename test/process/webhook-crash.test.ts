/**
 * At least once, across crashes: a real `plantstore serve` under concurrent creates with a subscriber on 127.0.0.1 is
 * killed (SIGKILL) at random moments and restarted; then stopped with SIGTERM while attempts are in flight. After the
 * last restart every acknowledged create must reach the subscriber, each plant always under one webhook-id
 * (duplicates allowed, as at-least-once means). On PostgreSQL, also two instances sharing one database's outbox.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { DATABASES, postgresDatabase, type TestDatabase } from '../helpers/databases.js';
import { createToken, runCli, startServer, type ServerProcess } from '../helpers/process.js';
import { Receiver, type Received } from '../helpers/receiver.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';

stopPostgresAfterAll();

const CLIENTS = 16;
const KILL_ROUNDS = 3;

function idOf(received: Received): string {
  return /^\{"id":(-?\d+),/.exec(received.body)?.[1] ?? 'none';
}

/** Clients creating distinct random plants until stopped; resolves with the ids answered 200. */
function load(server: ServerProcess, token: string, used: Set<string>) {
  const acknowledged = new Set<string>();
  let stopped = false;
  const client = async () => {
    while (!stopped && !server.exited()) {
      let id = randomBytes(8).readBigInt64BE().toString();
      while (used.has(id)) id = randomBytes(8).readBigInt64BE().toString();
      used.add(id);
      try {
        const response = await fetch(`${server.base}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: `{"id":${id},"name":"Crash ${id}"}`,
          signal: AbortSignal.timeout(20_000),
        });
        await response.arrayBuffer();
        if (response.status === 200) acknowledged.add(id);
      } catch {
        // Cut off by the kill: never acknowledged.
      }
    }
  };
  const done = Promise.all(Array.from({ length: CLIENTS }, client));
  return {
    async stop(): Promise<Set<string>> {
      stopped = true;
      await done;
      return acknowledged;
    },
  };
}

/** Every plant reached the receiver, and each under exactly one webhook-id however often it came. */
function assertEveryPlantDelivered(hook: Receiver, acknowledged: ReadonlySet<string>): void {
  const idsByPlant = new Map<string, Set<string>>();
  for (const request of hook.received) {
    const plant = idOf(request);
    const ids = idsByPlant.get(plant) ?? new Set<string>();
    ids.add(String(request.headers['webhook-id']));
    idsByPlant.set(plant, ids);
  }
  const missing = [...acknowledged].filter((id) => !idsByPlant.has(id));
  assert.deepEqual(missing.slice(0, 10), [], `${missing.length} of ${acknowledged.size} acknowledged creates never reached the subscriber`);
  for (const [plant, ids] of idsByPlant) assert.equal(ids.size, 1, `plant ${plant} came under ${ids.size} webhook-ids`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const { kind, create } of DATABASES) {
  describe(`webhooks across crashes on ${kind}`, () => {
    const cleanups: Array<() => Promise<void>> = [];
    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup();
    });

    it(`loses no event of an acknowledged create over ${KILL_ROUNDS} SIGKILLs and a SIGTERM under load`, { timeout: 240_000 }, async () => {
      const db: TestDatabase = await create();
      cleanups.push(() => db.cleanup());
      // A short answer delay keeps attempts in flight when the kill comes.
      const hook = await Receiver.start(() => ({ status: 200, delayMs: 5 }));
      cleanups.push(() => hook.close());
      const env = {
        DATABASE_URL: db.url,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_RETRY_SCHEDULE: '100ms,200ms,400ms,800ms,1s,1s,1s,1s,1s,1s',
        SHUTDOWN_TIMEOUT_MS: '4000',
      };
      const token = createToken('crash', env);
      runCli(['webhook', 'add', '--url', hook.url(), '--name', 'crash'], env);
      const used = new Set<string>();
      const acknowledged = new Set<string>();
      const servers: ServerProcess[] = [];
      cleanups.push(async () => {
        for (const server of servers) await server.kill();
      });

      for (let round = 0; round < KILL_ROUNDS; round += 1) {
        const server = await startServer(env);
        servers.push(server);
        const running = load(server, token, used);
        await sleep(randomInt(300, 1200));
        server.child.kill('SIGKILL');
        await server.stop('SIGKILL');
        for (const id of await running.stop()) acknowledged.add(id);
      }
      // SIGTERM while creating and sending: exit 0, attempts in flight finished or left for the next start.
      const terminated = await startServer(env);
      servers.push(terminated);
      const running = load(terminated, token, used);
      await sleep(500);
      const { code } = await terminated.stop('SIGTERM');
      for (const id of await running.stop()) acknowledged.add(id);
      assert.equal(code, 0, terminated.output().stderr);
      assert.ok(acknowledged.size > 50, `only ${acknowledged.size} creates were acknowledged`);

      const last = await startServer(env);
      servers.push(last);
      // On PostgreSQL a killed instance's claims run out after their lease (about 10 s with these settings).
      await hook.waitFor((received) => {
        const seen = new Set(received.map(idOf));
        return [...acknowledged].every((id) => seen.has(id));
      }, 90_000, `all ${acknowledged.size} acknowledged plants`);
      assertEveryPlantDelivered(hook, acknowledged);
      assert.equal((await last.stop('SIGTERM')).code, 0);
      const listed = runCli(['webhook', 'list'], env).stdout;
      assert.match(listed, /\tactive\t/);
    });
  });
}

describe('two plantstore instances on one PostgreSQL outbox', () => {
  const cleanups: Array<() => Promise<void>> = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('deliver every event, none sent twice at once (each webhook-id once, every attempt a 200)', { timeout: 120_000 }, async () => {
    const db = await postgresDatabase();
    cleanups.push(() => db.cleanup());
    // Slow enough that both instances hold claims at the same moment.
    let overlapping = 0;
    const open = new Set<string>();
    const hook = await Receiver.start((request) => {
      const id = String(request.headers['webhook-id']);
      if (open.has(id)) overlapping += 1;
      open.add(id);
      setTimeout(() => open.delete(id), 20);
      return { status: 200, delayMs: 20 };
    });
    cleanups.push(() => hook.close());
    const env = { DATABASE_URL: db.url, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION: '4' };
    runCli(['migrate'], env);
    const token = createToken('pair', env);
    runCli(['webhook', 'add', '--url', hook.url(), '--name', 'pair'], env);
    const servers = await Promise.all([startServer(env), startServer(env)]);
    cleanups.push(async () => {
      for (const server of servers) await server.kill();
    });
    // Creates alternate between the instances; each instance's dispatcher claims from the one shared outbox.
    const plants = 400;
    await Promise.all(
      Array.from({ length: 8 }, async (_, client) => {
        for (let i = client; i < plants; i += 8) {
          const server = servers[i % 2] as ServerProcess;
          const response = await fetch(`${server.base}/plants`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: `{"id":${9007199254740993n + BigInt(i)},"name":"Pair ${i}"}`,
          });
          assert.equal(response.status, 200);
        }
      }),
    );
    await hook.waitForCount(plants, 60_000);
    const ids = hook.received.map((request) => String(request.headers['webhook-id']));
    assert.equal(new Set(ids).size, plants, 'each event sent once');
    assert.equal(ids.length, plants, 'and no event sent twice');
    assert.equal(overlapping, 0, 'never the same event twice at once');
    const plantIds = new Set(hook.received.map(idOf));
    assert.ok(plantIds.has('9007199254740993') && plantIds.has(String(9007199254740993n + BigInt(plants - 1))));
    for (const server of servers) assert.equal((await server.stop('SIGTERM')).code, 0);
  });
});
