/**
 * The SQLite dispatcher's bookkeeping on the write connection: settlements commit like every other write on it, with
 * synchronous=NORMAL, made durable by the store's WAL sync (docs/design/webhooks.md, "The dispatcher's records"); they leave
 * the connection's setting alone, also when the commit fails; a round's deliveries add up per subscription.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SQLITE_CODES, openConnection, pragmaValue, prepareValue, type Connection } from '../../src/storage/sqlite/connection.js';
import { migrate } from '../../src/storage/sqlite/migrations.js';
import { SqliteChanges } from '../../src/storage/sqlite/changes.js';
import { SqlitePlants } from '../../src/storage/sqlite/plants.js';
import { SqliteWebhookOutbox } from '../../src/storage/sqlite/webhook-outbox.js';
import { SqliteWebhookSubscriptions } from '../../src/storage/sqlite/webhook-subscriptions.js';
import type { ClaimedWebhookEvent, WebhookAttemptResult } from '../../src/storage/webhook-store.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { sqliteFile } from '../helpers/transfer.js';

/** synchronous: 2 is FULL, 1 NORMAL. */
const NORMAL = 1;

describe('SQLite webhook settlements', () => {
  let database: TestDatabase;
  let db: Connection;
  let plants: SqlitePlants;
  let outbox: SqliteWebhookOutbox;
  let subscriptionId: bigint;

  before(async () => {
    database = await sqliteDatabase();
    db = openConnection(sqliteFile(database.url), 2);
    migrate(db);
    db.exec('PRAGMA busy_timeout = 0');
    // As the store's write connection is (src/storage/sqlite/sqlite-store.ts).
    db.exec('PRAGMA synchronous = NORMAL');
    // One connection reads and writes; a lock held elsewhere fails at once (the store would retry it).
    const run = async <T>(work: () => T) => work();
    outbox = new SqliteWebhookOutbox(db, db, { read: run, write: run });
    plants = new SqlitePlants(db, db, outbox, new SqliteChanges(db, db, { read: run, write: run }), { read: run, write: run });
    await new SqliteWebhookSubscriptions(db, db, { read: run, write: run }).add({ name: 'hook', url: 'https://example.com/h', secret: 'whsec_x', idPrefix: 'p1', createdAt: new Date() });
    subscriptionId = prepareValue<[], bigint>(db, 'SELECT id FROM webhook_subscriptions', { bigInts: true }).get() as bigint;
  });
  after(async () => {
    db.close();
    await database.cleanup();
  });

  const synchronous = () => pragmaValue(db, 'synchronous');
  const delivered = (events: readonly ClaimedWebhookEvent[], at: number): WebhookAttemptResult[] =>
    events.map((event, index) => ({ event, attemptedAt: new Date(at + index), status: 204, error: null, outcome: { kind: 'delivered' } }));

  it('claim and settle, leaving the connection at synchronous=NORMAL', async () => {
    assert.equal(synchronous(), NORMAL);
    const ids = [9007199254740993n, -9223372036854775808n, 9223372036854775807n];
    await plants.create(ids.map((id) => ({ id, name: 'p', tag: null })));
    const { claimed } = await outbox.settleAndClaim([], [{ subscriptionId, limit: 10 }], 60_000);
    assert.deepEqual(claimed.map((event) => event.plant.id).sort(), [...ids].sort());
    assert.equal(synchronous(), NORMAL);

    const at = Date.UTC(2026, 10, 23);
    assert.deepEqual((await outbox.settleAndClaim(delivered(claimed, at), [{ subscriptionId, limit: 10 }], 60_000)).claimed, []);
    assert.equal(synchronous(), NORMAL);
    const totals = db.prepare('SELECT delivered_total, last_success_at FROM webhook_subscriptions').get();
    assert.deepEqual({ ...totals }, { delivered_total: 3, last_success_at: at + 2 });
    assert.equal(prepareValue(db, 'SELECT count(*) FROM webhook_attempts').get(), 3);
  });

  it('leave it at synchronous=NORMAL when the commit fails', async () => {
    await plants.create([{ id: 5n, name: 'p', tag: null }]);
    const other = openConnection(sqliteFile(database.url), 2);
    try {
      other.exec('BEGIN IMMEDIATE');
      await assert.rejects(outbox.settleAndClaim([], [{ subscriptionId, limit: 10 }], 60_000), { code: 'ERR_SQLITE_ERROR', errcode: SQLITE_CODES.BUSY });
      assert.equal(synchronous(), NORMAL);
      other.exec('ROLLBACK');
    } finally {
      other.close();
    }
    assert.equal((await outbox.settleAndClaim([], [{ subscriptionId, limit: 10 }], 60_000)).claimed.length, 1);
    assert.equal(synchronous(), NORMAL);
  });
});
