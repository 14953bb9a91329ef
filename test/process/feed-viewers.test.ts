/**
 * A dashboard whose viewers share one read-only token, against a server with defaults: 500 change-feed streams from
 * 25 client addresses (20 each) are all served, and every one of them gets a create made meanwhile. The stream limits
 * default to what the memory budget allows one client (src/config/config.ts), not to a handful. Counts are asserted;
 * how fast each stream gets it is the feed bench's.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { EventStreamClient } from '../helpers/event-stream.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

const ADDRESSES = 25;
const PER_ADDRESS = 20;

describe('500 viewers of the change feed on one read-only token', { timeout: 120_000 }, () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let writer: string;
  let viewer: string;
  const streams: EventStreamClient[] = [];

  before(async () => {
    db = await sqliteDatabase();
    const env = { DATABASE_URL: db.url };
    writer = createToken('writer', env);
    viewer = createToken('dashboard', env, undefined, ['--read-only']);
    server = await startServer(env);
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await server?.kill();
    await db?.cleanup();
  });

  it(`${ADDRESSES * PER_ADDRESS} streams from ${ADDRESSES} addresses are all served, and each gets a create`, async () => {
    for (let address = 1; address <= ADDRESSES; address += 1) {
      const opened = await Promise.all(
        Array.from({ length: PER_ADDRESS }, () => EventStreamClient.open(`${server.base}/plants/events`, { authorization: `Bearer ${viewer}` }, `127.0.2.${address}`)),
      );
      streams.push(...opened);
    }
    const statuses = new Map<number, number>();
    for (const stream of streams) statuses.set(stream.status, (statuses.get(stream.status) ?? 0) + 1);
    assert.deepEqual(Object.fromEntries(statuses), { 200: ADDRESSES * PER_ADDRESS }, 'every stream is served');
    const response = await fetch(`${server.base}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
      body: '{"id":9007199254740993,"name":"watched"}',
    });
    assert.equal(response.status, 200, await response.text());
    const received = await Promise.all(streams.map(async (stream) => (await stream.waitForEvents(1))[0]?.data ?? ''));
    assert.equal(received.filter((data) => data.includes('9007199254740993')).length, ADDRESSES * PER_ADDRESS, 'every stream gets the create, its id exact');
  });
});
