/**
 * plantstore/client's watch across a crash: a real server, killed with SIGKILL while the client follows its feed,
 * started again on the same port. The client reconnects by itself from the last change it yielded and receives
 * every change after its cursor once, in order: those committed while it was cut off included.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PlantStore, type Change } from '../../src/client/index.js';
import { DATABASES } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

stopPostgresAfterAll();

const [ONE, PAST_DOUBLE, LOWEST, HIGHEST] = [1n, 2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n];

function describeChange(change: Change): string {
  if (change.type === 'plant.created') return `created ${change.plant.id} ${change.plant.name}`;
  if (change.type === 'plant.deleted') return `deleted ${change.id}`;
  return 'reset';
}

for (const { kind, create: createDatabase } of DATABASES) {
  describe(`the client's watch across a SIGKILL and a restart, on ${kind}`, () => {
    it('gets every change after its cursor once, in order', async (context) => {
      const db = await createDatabase();
      context.after(() => db.cleanup());
      const env = { DATABASE_URL: db.url };
      const token = createToken('watcher', env);
      let server: ServerProcess = await startServer(env);
      context.after(() => server.kill());
      const client = new PlantStore({ url: server.base, token });

      // The cursor: the sequence of a change made before the watch starts, which it must not see again.
      await client.create({ id: ONE, name: 'before the cursor' });
      let cursor: bigint | undefined;
      for await (const change of client.watch({ after: 0n })) {
        cursor = change.sequence;
        break;
      }
      assert.ok(cursor !== undefined);

      const stop = new AbortController();
      context.after(() => stop.abort());
      const seen: Change[] = [];
      const reconnections: string[] = [];
      let notify = () => {};
      const watching = (async () => {
        for await (const change of client.watch({ after: cursor, signal: stop.signal, onReconnect: (reason) => reconnections.push(String(reason?.message)) })) {
          seen.push(change);
          notify();
        }
      })();
      const until = (count: number) =>
        new Promise<void>((resolve) => {
          notify = () => {
            if (seen.length >= count) resolve();
          };
          notify();
        });

      await client.create({ id: PAST_DOUBLE, name: 'before the kill' });
      await until(1);
      await server.stop('SIGKILL');
      server = await startServer(env, { port: server.port });
      // Committed while the client is still cut off, waiting to reconnect.
      await client.create({ id: LOWEST, name: 'after the restart' });
      await client.delete(PAST_DOUBLE);
      await client.create({ id: HIGHEST, name: 'last' });
      await until(4);
      stop.abort();
      await watching;

      assert.deepEqual(seen.map(describeChange), [
        `created ${PAST_DOUBLE} before the kill`,
        `created ${LOWEST} after the restart`,
        `deleted ${PAST_DOUBLE}`,
        `created ${HIGHEST} last`,
      ]);
      const sequences = seen.map((change) => change.sequence);
      assert.ok(sequences.every((sequence, index) => sequence > (index === 0 ? (cursor as bigint) : (sequences[index - 1] as bigint))), `after ${cursor}, increasing: ${sequences.join(' ')}`);
      assert.ok(reconnections.length >= 1, 'it was cut off and reconnected');
    });
  });
}
