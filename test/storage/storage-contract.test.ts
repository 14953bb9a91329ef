import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { SCOPES } from '../../src/auth/scopes.js';
import { loadConfig, type DatabaseConfig } from '../../src/config/config.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import { openStore } from '../../src/storage/open.js';
import { DuplicateTokenNameError } from '../../src/storage/errors.js';
import type { Store } from '../../src/storage/store.js';
import type { CreateOutcome } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import type { PlantChange } from '../../src/storage/change-store.js';
import type { ClaimedWebhookEvent, WebhookAttemptOutcome, WebhookAttemptResult, WebhookRecord, WebhookSubscriptionInfo } from '../../src/storage/webhook-store.js';
import { DATABASES, type TestDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { newToken } from '../helpers/tokens.js';
import { freePort } from '../helpers/process.js';

stopPostgresAfterAll();

/**
 * One storage contract, held by every store: what the service relies on from storage, checked through the Store
 * interface alone, so SQLite and PostgreSQL answer exactly alike.
 */

/** 2^53 + 1: the first integer a double cannot hold; it must come back with every digit. */
const BEYOND_DOUBLE = 9007199254740993n;

function configFor(url: string): DatabaseConfig {
  return loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent' }).database;
}

function plant(id: bigint, name = `plant ${id}`, tag: string | null = null): Plant {
  return { id, name, tag };
}

function hashOf(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function createdCount(outcomes: readonly CreateOutcome[]): number {
  return outcomes.filter((outcome) => outcome.kind === 'created').length;
}

for (const database of DATABASES) {
  describe(`storage contract on ${database.kind}`, () => {
    /** A fresh database and a store opened on it, closed and removed afterwards whatever happens. */
    async function withStore(work: (store: Store, db: TestDatabase) => Promise<void>): Promise<void> {
      const db = await database.create();
      try {
        const store = await openStore(configFor(db.url));
        try {
          assert.equal(store.kind, database.kind);
          await work(store, db);
        } finally {
          await store.close();
        }
      } finally {
        await db.cleanup();
      }
    }

    it('commits a heartbeat write to prove it is writable, as often as asked', () =>
      withStore(async (store) => {
        await store.checkWritable();
        await Promise.all(Array.from({ length: 5 }, () => store.checkWritable()));
      }));

    it('creates a batch: every row created, and stored as given', () =>
      withStore(async (store) => {
        const batch = [plant(1n, 'Monstera', 'aroid'), plant(2n, 'Fern'), plant(3n, 'Pothos', 'vine')];
        assert.deepEqual(await store.plants.create(batch), [{ kind: 'created' }, { kind: 'created' }, { kind: 'created' }]);
        for (const row of batch) assert.deepEqual(await store.plants.get(row.id), row);
        assert.equal(await store.plants.get(4n), undefined);
      }));

    it('reports an id stored already as existing, with the stored content, and leaves it unchanged (replay or conflict is the domain\'s rule)', () =>
      withStore(async (store) => {
        const original = plant(10n, 'Monstera', 'aroid');
        await store.plants.create([original]);
        assert.deepEqual(await store.plants.create([original]), [{ kind: 'existing', stored: original }]);
        // Different content is not written: the caller gets what is stored and decides (409).
        assert.deepEqual(await store.plants.create([plant(10n, 'Other', null)]), [{ kind: 'existing', stored: original }]);
        assert.deepEqual(await store.plants.get(10n), original);
      }));

    it('answers a batch of distinct ids in input order, new and existing mixed, whatever the id order', () =>
      withStore(async (store) => {
        await store.plants.create([plant(5n, 'five'), plant(-7n, 'minus seven', 't')]);
        const batch = [plant(9n), plant(5n, 'changed'), plant(-100n), plant(0n), plant(-7n, 'minus seven', 't'), plant(1n)];
        const outcomes = await store.plants.create(batch);
        assert.deepEqual(outcomes, [
          { kind: 'created' },
          { kind: 'existing', stored: plant(5n, 'five') },
          { kind: 'created' },
          { kind: 'created' },
          { kind: 'existing', stored: plant(-7n, 'minus seven', 't') },
          { kind: 'created' },
        ]);
        assert.deepEqual(await store.plants.create([]), []);
      }));

    it('answers later copies of an id within one call as existing, with the first copy\'s content', () =>
      withStore(async (store) => {
        // GroupCommitter passes a turn's creates as they came, repeats included: a store must not report one id
        // created twice, or two different contents would both be answered 200.
        await store.plants.create([plant(7n, 'seven', 's')]);
        const outcomes = await store.plants.create([plant(1n, 'first'), plant(7n, 'other'), plant(1n, 'second', 't'), plant(7n, 'third'), plant(1n, 'first')]);
        assert.deepEqual(outcomes, [
          { kind: 'created' },
          { kind: 'existing', stored: plant(7n, 'seven', 's') },
          { kind: 'existing', stored: plant(1n, 'first') },
          { kind: 'existing', stored: plant(7n, 'seven', 's') },
          { kind: 'existing', stored: plant(1n, 'first') },
        ]);
        assert.deepEqual(await store.plants.get(1n), plant(1n, 'first'));
        assert.deepEqual(await store.plants.get(7n), plant(7n, 'seven', 's'));
        // The very same object twice is still two copies.
        const twice = plant(3n, 'twice');
        assert.deepEqual(await store.plants.create([twice, twice]), [{ kind: 'created' }, { kind: 'existing', stored: twice }]);
      }));

    it('keeps int64 ends and integers beyond a double exact through create, get and list', () =>
      withStore(async (store) => {
        const ids = [INT64_MIN, INT64_MAX, BEYOND_DOUBLE, -BEYOND_DOUBLE, BEYOND_DOUBLE - 1n];
        assert.equal(INT64_MIN, -9223372036854775808n);
        assert.equal(INT64_MAX, 9223372036854775807n);
        assert.equal(createdCount(await store.plants.create(ids.map((id) => plant(id, `n${id}`)))), ids.length);
        for (const id of ids) {
          const stored = await store.plants.get(id);
          assert.equal(typeof stored?.id, 'bigint');
          assert.deepEqual(stored, plant(id, `n${id}`));
        }
        // Neighbours that a rounding double would confuse are distinct rows.
        assert.equal(await store.plants.get(BEYOND_DOUBLE + 1n), undefined);
        const listed = await store.plants.list({ limit: 100 });
        assert.deepEqual(
          listed.map((row) => row.id),
          [INT64_MIN, -BEYOND_DOUBLE, BEYOND_DOUBLE - 1n, BEYOND_DOUBLE, INT64_MAX],
        );
        // The replay path reads the stored id back too.
        assert.deepEqual(await store.plants.create([plant(INT64_MAX, 'x')]), [{ kind: 'existing', stored: plant(INT64_MAX, `n${INT64_MAX}`) }]);
        assert.deepEqual(await store.plants.list({ limit: 10, after: INT64_MAX }), []);
        assert.deepEqual((await store.plants.list({ limit: 1, after: INT64_MIN })).map((row) => row.id), [-BEYOND_DOUBLE]);
      }));

    it('tells a null tag from an empty one', () =>
      withStore(async (store) => {
        await store.plants.create([plant(1n, 'untagged', null), plant(2n, 'empty', ''), plant(3n, 'tagged', 'a')]);
        assert.equal((await store.plants.get(1n))?.tag, null);
        assert.equal((await store.plants.get(2n))?.tag, '');
        assert.deepEqual(await store.plants.list({ limit: 10, tag: '' }), [plant(2n, 'empty', '')]);
        // A replay with '' where null is stored reports the stored null, so the service can call it different.
        assert.deepEqual(await store.plants.create([plant(1n, 'untagged', '')]), [{ kind: 'existing', stored: plant(1n, 'untagged', null) }]);
      }));

    it('lists by keyset: ascending ids, strictly after the cursor, only the tag asked, at most the limit', () =>
      withStore(async (store) => {
        const rows: Plant[] = [];
        for (let i = -5n; i <= 14n; i += 1n) rows.push(plant(i * 1000n, `p${i}`, i % 2n === 0n ? 'even' : i % 3n === 0n ? 'EVEN' : null));
        // Shuffled across two batches: order must come from the store, not from insertion.
        await store.plants.create(rows.filter((_, index) => index % 2 === 1).reverse());
        await store.plants.create(rows.filter((_, index) => index % 2 === 0));
        assert.deepEqual(await store.plants.list({ limit: 100 }), rows);
        assert.deepEqual(await store.plants.list({ limit: 3 }), rows.slice(0, 3));
        assert.deepEqual(await store.plants.list({ limit: 3, after: -5000n }), rows.slice(1, 4));
        assert.deepEqual(await store.plants.list({ limit: 3, after: -4999n }), rows.slice(1, 4));
        assert.deepEqual(await store.plants.list({ limit: 100, after: 14_000n }), []);
        const even = rows.filter((row) => row.tag === 'even');
        assert.deepEqual(await store.plants.list({ limit: 100, tag: 'even' }), even);
        assert.deepEqual(await store.plants.list({ limit: 2, tag: 'even', after: (even[1] as Plant).id }), even.slice(2, 4));
        assert.deepEqual(await store.plants.list({ limit: 100, tag: 'EVEN' }), rows.filter((row) => row.tag === 'EVEN'));
        assert.deepEqual(await store.plants.list({ limit: 100, tag: 'none' }), []);
        // Paging through the whole table, page by page, visits every row once.
        const seen: Plant[] = [];
        let after: bigint | undefined;
        for (;;) {
          const page = await store.plants.list({ limit: 7, ...(after === undefined ? {} : { after }) });
          seen.push(...page);
          if (page.length < 7) break;
          after = page.at(-1)?.id;
        }
        assert.deepEqual(seen, rows);
      }));

    it('deletes a plant once, and the id can be created again afterwards', () =>
      withStore(async (store) => {
        await store.plants.create([plant(42n, 'old', 'x'), plant(43n, 'kept')]);
        assert.equal(await store.plants.delete(42n), true);
        assert.equal(await store.plants.delete(42n), false);
        assert.equal(await store.plants.delete(44n), false);
        assert.equal(await store.plants.get(42n), undefined);
        assert.deepEqual(await store.plants.list({ limit: 10 }), [plant(43n, 'kept')]);
        assert.deepEqual(await store.plants.create([plant(42n, 'new', null)]), [{ kind: 'created' }]);
        assert.deepEqual(await store.plants.get(42n), plant(42n, 'new', null));
      }));

    it('keeps tokens: add, find by hash, all, list, duplicate names, last use, revoke', () =>
      withStore(async (store) => {
        const { tokens } = store;
        const createdAt = new Date('2026-01-02T03:04:05.678Z');
        await tokens.add(newToken('beta', hashOf('b'), { createdAt }));
        await tokens.add(newToken('alpha', hashOf('a'), { createdAt: new Date('2026-01-01T00:00:00.000Z') }));
        await assert.rejects(tokens.add(newToken('beta', hashOf('other'))), DuplicateTokenNameError);

        const found = await tokens.find(hashOf('b'));
        assert.deepEqual(found, { name: 'beta', hash: hashOf('b'), scopes: SCOPES, expiresAt: null });
        assert.ok(Buffer.isBuffer(found?.hash));
        assert.equal(await tokens.find(hashOf('nobody')), undefined);
        assert.deepEqual(
          (await tokens.all()).sort((a, b) => a.name.localeCompare(b.name)),
          [
            { name: 'alpha', hash: hashOf('a'), scopes: SCOPES, expiresAt: null },
            { name: 'beta', hash: hashOf('b'), scopes: SCOPES, expiresAt: null },
          ],
        );
        assert.deepEqual(await tokens.list(), [
          { name: 'alpha', scopes: SCOPES, createdAt: new Date('2026-01-01T00:00:00.000Z'), expiresAt: null, lastUsedAt: null },
          { name: 'beta', scopes: SCOPES, createdAt, expiresAt: null, lastUsedAt: null },
        ]);

        const used = new Date('2026-02-01T00:00:00.123Z');
        await tokens.recordUse(new Map([['beta', used], ['gone', used]]));
        // An older use, reported late, never moves the last use back.
        await tokens.recordUse(new Map([['beta', new Date('2026-01-15T00:00:00.000Z')]]));
        await tokens.recordUse(new Map());
        assert.deepEqual((await tokens.list()).map((token) => token.lastUsedAt), [null, used]);

        assert.equal(await tokens.revoke('beta'), true);
        assert.equal(await tokens.revoke('beta'), false);
        assert.equal(await tokens.find(hashOf('b')), undefined);
        assert.deepEqual((await tokens.all()).map((token) => token.name), ['alpha']);
        // A revoked name can be given to a new token.
        await tokens.add(newToken('beta', hashOf('b2'), { createdAt }));
        assert.deepEqual(await tokens.find(hashOf('b2')), { name: 'beta', hash: hashOf('b2'), scopes: SCOPES, expiresAt: null });
      }));

    it('keeps each token\'s scopes as given and its expiry to the millisecond; expired tokens stay found and listed until revoked', () =>
      withStore(async (store) => {
        const { tokens } = store;
        const past = new Date('2020-02-29T12:34:56.789Z');
        const future = new Date('2099-12-31T23:59:59.001Z');
        await tokens.add(newToken('reader', hashOf('reader'), { scopes: ['plants:read'] }));
        await tokens.add(newToken('writer', hashOf('writer'), { scopes: ['plants:create', 'plants:delete'], expiresAt: future }));
        await tokens.add(newToken('expired', hashOf('expired'), { scopes: ['plants:delete'], expiresAt: past }));
        // Names storage does not know are kept as they are (a newer plantstore may have written them); none is none.
        await tokens.add(newToken('odd', hashOf('odd'), { scopes: ['plants:read', 'plants:update'] }));
        await tokens.add(newToken('nothing', hashOf('nothing'), { scopes: [] }));
        const expected = {
          reader: { scopes: ['plants:read'], expiresAt: null },
          writer: { scopes: ['plants:create', 'plants:delete'], expiresAt: future },
          expired: { scopes: ['plants:delete'], expiresAt: past },
          odd: { scopes: ['plants:read', 'plants:update'], expiresAt: null },
          nothing: { scopes: [], expiresAt: null },
        };
        for (const [name, want] of Object.entries(expected)) {
          assert.deepEqual(await tokens.find(hashOf(name)), { name, hash: hashOf(name), ...want }, name);
        }
        assert.deepEqual(
          Object.fromEntries((await tokens.all()).map(({ name, scopes, expiresAt }) => [name, { scopes, expiresAt }])),
          expected,
        );
        assert.deepEqual(
          (await tokens.list()).map(({ name, scopes, expiresAt }) => ({ name, scopes, expiresAt })),
          Object.entries(expected)
            .map(([name, want]) => ({ name, ...want }))
            .sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name))),
        );
        // A name with whitespace in it would not read back as one scope: refused, and nothing stored.
        await assert.rejects(tokens.add(newToken('spaced', hashOf('spaced'), { scopes: ['plants:read plants:delete'] })), /scope name/);
        assert.equal(await tokens.find(hashOf('spaced')), undefined);
        assert.equal(await tokens.revoke('expired'), true);
        assert.equal(await tokens.find(hashOf('expired')), undefined);
      }));

    it('exports tokens with their hashes, scopes, expiry and times, in byte order of name', () =>
      withStore(async (store) => {
        const { tokens } = store;
        assert.deepEqual(await tokens.exportAll(), []);
        // Byte order puts '.' < digits < upper case < '_' < lower case; a linguistic collation would not.
        const names = ['b', 'B', '_x', 'a.1', 'A-2', '.dot', '9'];
        for (const [index, name] of names.entries()) await tokens.add(newToken(name, hashOf(name), { createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, index, 7)) }));
        const expiresAt = new Date('2027-02-22T10:00:00.500Z');
        await tokens.add(newToken('c', hashOf('c'), { createdAt: new Date(0), scopes: ['plants:read'], expiresAt }));
        const used = new Date('2026-03-04T05:06:07.089Z');
        await tokens.recordUse(new Map([['b', used]]));
        const exported = await tokens.exportAll();
        assert.deepEqual(
          exported.map((token) => token.name),
          [...names, 'c'].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
        );
        assert.deepEqual(
          (await tokens.list()).map((token) => token.name),
          exported.map((token) => token.name),
          'list in the same byte order',
        );
        assert.deepEqual(exported.find((token) => token.name === 'b'), { name: 'b', hash: hashOf('b'), scopes: SCOPES, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, 7)), expiresAt: null, lastUsedAt: used });
        assert.deepEqual(exported.find((token) => token.name === '9'), { name: '9', hash: hashOf('9'), scopes: SCOPES, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 6, 7)), expiresAt: null, lastUsedAt: null });
        assert.deepEqual(exported.find((token) => token.name === 'c'), { name: 'c', hash: hashOf('c'), scopes: ['plants:read'], createdAt: new Date(0), expiresAt, lastUsedAt: null });
        assert.ok(exported.every((token) => Buffer.isBuffer(token.hash)));
      }));

    it('imports tokens as another database had them: new ones with their scopes and times, identical ones kept, clashes refused', () =>
      withStore(async (store) => {
        const { tokens } = store;
        const createdAt = new Date('2026-01-02T03:04:05.678Z');
        const used = new Date('2026-02-01T00:00:00.123Z');
        const expiresAt = new Date('2026-06-01T00:00:00.000Z');
        await tokens.add(newToken('kept', hashOf('kept'), { createdAt }));
        await tokens.add(newToken('used', hashOf('used'), { createdAt }));
        await tokens.add(newToken('limited', hashOf('limited'), { createdAt, scopes: ['plants:read'], expiresAt }));
        await tokens.recordUse(new Map([['used', used]]));
        const record = (name: string, hash: Buffer, at: Date, lastUsedAt: Date | null, scopes: readonly string[] = SCOPES, expiry: Date | null = null) => ({
          name,
          hash,
          scopes,
          createdAt: at,
          expiresAt: expiry,
          lastUsedAt,
        });
        const later = new Date('2026-05-05T05:05:05.555Z');
        const outcomes = await tokens.importAll([
          record('new', hashOf('new'), new Date('2025-12-31T23:59:59.999Z'), later, ['plants:create'], new Date('2030-01-01T00:00:00.001Z')),
          record('kept', hashOf('kept'), createdAt, later),
          record('used', hashOf('used'), createdAt, new Date('2026-01-15T00:00:00.000Z')),
          record('kept', hashOf('another'), createdAt, null),
          record('thief', hashOf('used'), createdAt, null),
          record('used', hashOf('used'), new Date(0), null),
          record('limited', hashOf('limited'), createdAt, null, ['plants:read'], expiresAt),
          // The same token but for what it may do, or until when: not the same token.
          record('limited', hashOf('limited'), createdAt, null, SCOPES, expiresAt),
          record('limited', hashOf('limited'), createdAt, null, ['plants:read'], null),
        ]);
        const storedUsed = record('used', hashOf('used'), createdAt, used);
        const storedLimited = record('limited', hashOf('limited'), createdAt, null, ['plants:read'], expiresAt);
        assert.deepEqual(outcomes, [
          { kind: 'created' },
          { kind: 'replayed' },
          { kind: 'replayed' },
          { kind: 'conflict', stored: record('kept', hashOf('kept'), createdAt, later) },
          { kind: 'conflict', stored: storedUsed },
          { kind: 'conflict', stored: storedUsed },
          { kind: 'replayed' },
          { kind: 'conflict', stored: storedLimited },
          { kind: 'conflict', stored: storedLimited },
        ]);
        assert.deepEqual(await tokens.exportAll(), [
          // The identical token's last use moved forward to the imported one; the other's was not moved back.
          record('kept', hashOf('kept'), createdAt, later),
          storedLimited,
          record('new', hashOf('new'), new Date('2025-12-31T23:59:59.999Z'), later, ['plants:create'], new Date('2030-01-01T00:00:00.001Z')),
          storedUsed,
        ]);
        // An imported token authenticates like any other, with its scopes and expiry.
        assert.deepEqual(await tokens.find(hashOf('new')), { name: 'new', hash: hashOf('new'), scopes: ['plants:create'], expiresAt: new Date('2030-01-01T00:00:00.001Z') });
        assert.deepEqual(await tokens.importAll([]), []);
      }));

    it('exports webhook subscriptions with secrets, previous secret, id prefix, times and state, in byte order of name', () =>
      withStore(async (store) => {
        assert.deepEqual(await store.webhookSubscriptions.exportAll(), []);
        const names = ['b', 'B', '_x', 'a.1', '.dot'];
        for (const [index, name] of names.entries()) {
          await store.webhookSubscriptions.add({ name, url: `https://${index}.example/hook`, secret: `whsec_${name}`, idPrefix: `p${index}`, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, index, 7)) });
        }
        assert.equal(await store.webhookSubscriptions.rotateSecret('b', 'whsec_new', 3_600_000), true);
        assert.equal(await store.webhookSubscriptions.setEnabled('B', false, 'receiver moved'), true);
        const exported = await store.webhookSubscriptions.exportAll();
        assert.deepEqual(
          exported.map((subscription) => subscription.name),
          [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
        );
        const rotated = exported.find((subscription) => subscription.name === 'b') as WebhookRecord;
        assert.equal(rotated.secret, 'whsec_new');
        assert.equal(rotated.previousSecret, 'whsec_b');
        assert.ok(rotated.previousSecretUntil instanceof Date && rotated.previousSecretUntil.getTime() > Date.now() + 3_500_000);
        const disabled = exported.find((subscription) => subscription.name === 'B') as WebhookRecord;
        assert.ok(disabled.disabledAt instanceof Date);
        assert.equal(disabled.disabledReason, 'receiver moved');
        assert.deepEqual(exported.find((subscription) => subscription.name === '_x'), {
          name: '_x',
          url: 'https://2.example/hook',
          secret: 'whsec__x',
          previousSecret: null,
          previousSecretUntil: null,
          idPrefix: 'p2',
          createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 2, 7)),
          disabledAt: null,
          disabledReason: null,
        });
      }));

    it('imports webhook subscriptions as another database had them: new ones whole, identical ones kept, differing ones refused', () =>
      withStore(async (store) => {
        const createdAt = new Date('2026-01-02T03:04:05.678Z');
        const record = (name: string, changes: Partial<WebhookRecord> = {}): WebhookRecord => ({
          name,
          url: `https://${name}.example/hook`,
          secret: `whsec_${name}`,
          previousSecret: null,
          previousSecretUntil: null,
          idPrefix: `prefix${name}`,
          createdAt,
          disabledAt: null,
          disabledReason: null,
          ...changes,
        });
        await store.webhookSubscriptions.add({ name: 'kept', url: 'https://kept.example/hook', secret: 'whsec_kept', idPrefix: 'prefixkept', createdAt });
        await store.webhookSubscriptions.add({ name: 'other', url: 'https://other.example/hook', secret: 'whsec_other', idPrefix: 'prefixother', createdAt });
        const full = record('full', {
          previousSecret: 'whsec_before',
          previousSecretUntil: new Date('2099-01-01T00:00:00.001Z'),
          disabledAt: new Date('2026-02-03T04:05:06.789Z'),
          disabledReason: 'failing since',
        });
        const outcomes = await store.webhookSubscriptions.importAll([
          full,
          record('active', { previousSecret: 'whsec_old', previousSecretUntil: new Date('2099-01-01T00:00:00.000Z') }),
          // The id prefix is not compared: a copy gives its own.
          record('kept', { idPrefix: 'another' }),
          record('other', { secret: 'whsec_stranger' }),
          record('other', { url: 'https://elsewhere.example/hook' }),
          record('other', { disabledAt: createdAt, disabledReason: 'off' }),
          record('other', { createdAt: new Date(0) }),
        ]);
        assert.deepEqual(outcomes, [
          { kind: 'created' },
          { kind: 'created' },
          { kind: 'replayed' },
          { kind: 'conflict' },
          { kind: 'conflict' },
          { kind: 'conflict' },
          { kind: 'conflict' },
        ]);
        assert.deepEqual(await store.webhookSubscriptions.exportAll(), [
          record('active', { previousSecret: 'whsec_old', previousSecretUntil: new Date('2099-01-01T00:00:00.000Z') }),
          full,
          record('kept'),
          record('other'),
        ]);
        // An imported subscription signs with both its secrets, under its own id prefix; a disabled one is not active.
        assert.deepEqual(
          (await store.webhookOutbox.active()).filter((subscription) => subscription.name === 'active').map(({ idPrefix, secrets }) => ({ idPrefix, secrets })),
          [{ idPrefix: 'prefixactive', secrets: ['whsec_active', 'whsec_old'] }],
        );
        assert.ok(!(await store.webhookOutbox.active()).some((subscription) => subscription.name === 'full'));
        assert.deepEqual(await store.webhookSubscriptions.importAll([]), []);
      }));

    describe('the change log', () => {
      /** What a change says, without its time: the feed's events are made of this. */
      const summary = (changes: readonly PlantChange[]) =>
        changes.map((change) => (change.kind === 'created' ? [change.sequence, 'created', change.plant] : [change.sequence, 'deleted', change.id]));

      it('is empty at first: newest 0, nothing retained', () =>
        withStore(async (store) => {
          assert.equal(await store.changes.newestSequence(), 0n);
          assert.equal(await store.changes.oldestRetained(), undefined);
          assert.deepEqual(await store.changes.changesAfter(0n, 10), []);
        }));

      it('records each create and delete once, in commit order, with exact int64 ids; replays, conflicts and missed deletes record nothing', () =>
        withStore(async (store) => {
          const ends = [plant(BEYOND_DOUBLE, 'Beyond', 'x'), plant(INT64_MIN, 'Min'), plant(INT64_MAX, 'Max', 'y')];
          await store.plants.create(ends);
          await store.plants.create([plant(BEYOND_DOUBLE, 'Beyond', 'x'), plant(INT64_MAX, 'Other')]);
          assert.equal(await store.plants.delete(INT64_MIN), true);
          assert.equal(await store.plants.delete(INT64_MIN), false);
          await store.plants.create([plant(INT64_MIN, 'Min again')]);
          const changes = await store.changes.changesAfter(0n, 100);
          const first = changes[0]?.sequence ?? 0n;
          assert.ok(first >= 1n);
          // A batch is numbered in id order, as it is inserted.
          assert.deepEqual(summary(changes), [
            [first, 'created', plant(INT64_MIN, 'Min')],
            [first + 1n, 'created', plant(BEYOND_DOUBLE, 'Beyond', 'x')],
            [first + 2n, 'created', plant(INT64_MAX, 'Max', 'y')],
            [first + 3n, 'deleted', INT64_MIN],
            [first + 4n, 'created', plant(INT64_MIN, 'Min again')],
          ]);
          assert.ok(changes.every((change) => change.at instanceof Date && Math.abs(change.at.getTime() - Date.now()) < 3_600_000));
          assert.equal(await store.changes.newestSequence(), first + 4n);
          assert.equal(await store.changes.oldestRetained(), first);
          // Paged: strictly after the cursor, at most the limit.
          assert.deepEqual(summary(await store.changes.changesAfter(first + 1n, 2)), summary(changes.slice(2, 4)));
          assert.deepEqual(await store.changes.changesAfter(first + 4n, 10), []);
        }));

      it('numbers a large batch given in any order in id order, each change with its own plant', () =>
        withStore(async (store) => {
          // 133 rows: more than one statement's worth wherever a store writes several changes per statement.
          const plants = Array.from({ length: 133 }, (_, index) => plant(BigInt(1000 - index * 7), `Plant ${index}`, index % 3 === 0 ? null : `tag${index % 5}`));
          const outcomes = await store.plants.create(plants);
          assert.ok(outcomes.every((outcome) => outcome.kind === 'created'));
          const changes = await store.changes.changesAfter(0n, 1000);
          const first = changes[0]?.sequence ?? 0n;
          const ascending = [...plants].sort((a, b) => (a.id < b.id ? -1 : 1));
          assert.deepEqual(summary(changes), ascending.map((stored, index) => [first + BigInt(index), 'created', stored]));
        }));

      it('numbers concurrent writers without a gap or a repeat', () =>
        withStore(async (store) => {
          const batches = Array.from({ length: 8 }, (_, batch) => Array.from({ length: 5 }, (_, row) => plant(BigInt(batch * 100 + row + 1))));
          await Promise.all([...batches.map((batch) => store.plants.create(batch)), store.plants.delete(12345n)]);
          const changes = await store.changes.changesAfter(0n, 1000);
          assert.equal(changes.length, 40);
          const first = changes[0]?.sequence ?? 0n;
          changes.forEach((change, index) => assert.equal(change.sequence, first + BigInt(index)));
          assert.deepEqual(new Set(changes.map((change) => (change.kind === 'created' ? change.plant.id : undefined))).size, 40);
        }));

      it('prunes by count and by age, never the newest change', () =>
        withStore(async (store) => {
          for (let id = 1n; id <= 6n; id += 1n) await store.plants.create([plant(id)]);
          const newest = await store.changes.newestSequence();
          assert.equal(await store.changes.pruneChanges(86_400_000, 4), 2);
          assert.equal(await store.changes.oldestRetained(), newest - 3n);
          assert.equal(await store.changes.pruneChanges(86_400_000, 4), 0);
          // Everything is older than no time at all, yet the newest stays: it says where the log stands.
          await sleep(5);
          assert.equal(await store.changes.pruneChanges(0, 1_000_000), 3);
          assert.equal(await store.changes.oldestRetained(), newest);
          assert.equal(await store.changes.newestSequence(), newest);
          await store.plants.delete(6n);
          assert.deepEqual(summary(await store.changes.changesAfter(newest, 10)), [[newest + 1n, 'deleted', 6n]]);
        }));

      it('tells its listeners of every commit that wrote changes', () =>
        withStore(async (store) => {
          const heard = (): Promise<void> =>
            new Promise((resolve) => {
              const stop = store.changes.onCommitted?.(() => {
                stop?.();
                resolve();
              });
            });
          assert.ok(store.changes.onCommitted, 'the store that writes can tell');
          // A new listener is called once as it starts listening (for what committed before), then after each commit.
          await heard();
          const created = heard();
          await store.plants.create([plant(7n)]);
          await created;
          const deleted = heard();
          await store.plants.delete(7n);
          await deleted;
        }));
    });

    describe('the webhook outbox', () => {
      const LEASE_MS = 60_000;
      const GONE = 'the endpoint answered 410 Gone';

      async function subscribe(store: Store, name: string): Promise<bigint> {
        await store.webhookSubscriptions.add({ name, url: `https://${name}.example/hook`, secret: `whsec_${name}`, idPrefix: `prefix${name}`, createdAt: new Date() });
        const subscription = (await store.webhookOutbox.active()).find((active) => active.name === name);
        assert.ok(subscription);
        return subscription.id;
      }

      /** Settles `results` and claims up to `limit` due events of each subscription, in one call; the events by plant id. */
      async function settleAndClaim(store: Store, results: readonly WebhookAttemptResult[], subscriptions: readonly bigint[], limit = 100, leaseMs = LEASE_MS) {
        const settled = await store.webhookOutbox.settleAndClaim(results, subscriptions.map((subscriptionId) => ({ subscriptionId, limit })), leaseMs);
        settled.claimed.sort((a, b) => (a.plant.id < b.plant.id ? -1 : a.plant.id > b.plant.id ? 1 : 0));
        return settled;
      }

      /** Two subscriptions and their events for plants 1 and 2, claimed (in plant order). */
      async function twoSubscriptionsClaimed(store: Store, ...names: [string, string]) {
        const [a, b] = [await subscribe(store, names[0]), await subscribe(store, names[1])];
        await store.plants.create([plant(1n), plant(2n)]);
        const events = await claim(store, [a, b]);
        const of = (id: bigint) => ({ id, events: events.filter((event) => event.subscriptionId === id) as [ClaimedWebhookEvent, ClaimedWebhookEvent] });
        return [of(a), of(b)] as const;
      }

      const claim = async (store: Store, subscriptions: readonly bigint[], limit?: number, leaseMs?: number) =>
        (await settleAndClaim(store, [], subscriptions, limit, leaseMs)).claimed;

      function attempt(event: ClaimedWebhookEvent, at: number, outcome: WebhookAttemptOutcome, status: number | null, error: string | null = null): WebhookAttemptResult {
        return { event, attemptedAt: new Date(at), status, error, outcome };
      }
      const delivered = (event: ClaimedWebhookEvent, at: number) => attempt(event, at, { kind: 'delivered' }, 204);
      const retried = (event: ClaimedWebhookEvent, at: number, error: string, retryInMs = LEASE_MS) => attempt(event, at, { kind: 'retry', retryInMs }, null, error);
      const spent = (event: ClaimedWebhookEvent, at: number, reason: string) => attempt(event, at, { kind: 'failed', disableReason: reason }, 500, 'HTTP 500');
      const gone = (event: ClaimedWebhookEvent, at: number) => attempt(event, at, { kind: 'retry', retryInMs: LEASE_MS, disable: GONE }, 410, 'HTTP 410');

      /**
       * A moment in the past, yet after the events just created: attempts are settled after they were made, and a
       * retry after 0 ms is due at once whichever clock the store counts it on.
       */
      async function pastMoment(): Promise<number> {
        await sleep(40);
        return Date.now() - 20;
      }

      async function subscription(store: Store, name: string): Promise<WebhookSubscriptionInfo> {
        const found = (await store.webhookSubscriptions.list()).find((info) => info.name === name);
        assert.ok(found, name);
        return found;
      }

      it('claims due events of active subscriptions, each once while its lease lasts, with the plant exact', () =>
        withStore(async (store) => {
          const first = await subscribe(store, 'first');
          const second = await subscribe(store, 'second');
          const plants = [plant(INT64_MIN, 'min'), plant(BEYOND_DOUBLE, 'beyond', 't'), plant(INT64_MAX, 'max')];
          const before = Date.now();
          await store.plants.create(plants);
          // A replay writes no event.
          await store.plants.create([plants[0] as Plant]);
          assert.equal(await store.webhookOutbox.countWaiting(), 6);

          const some = await claim(store, [first], 2);
          assert.equal(some.length, 2);
          const rest = await claim(store, [first, second]);
          const claimed = [...some, ...rest].filter((event) => event.subscriptionId === first);
          assert.deepEqual(claimed.map((event) => event.plant).sort((a, b) => (a.id < b.id ? -1 : 1)), plants);
          assert.deepEqual(rest.filter((event) => event.subscriptionId === second).map((event) => event.plant), plants);
          for (const event of [...some, ...rest]) {
            assert.equal(typeof event.id, 'bigint');
            assert.equal(event.attempts, 0);
            assert.equal(event.retryIndex, 0);
            assert.ok(event.createdAt.getTime() >= before - 1000 && event.createdAt.getTime() <= Date.now() + 1000);
          }
          assert.equal(new Set([...some, ...rest].map((event) => event.id)).size, 6);
          // Every event is leased: nothing more is due, and claimed events still count as waiting.
          assert.deepEqual(await claim(store, [first, second]), []);
          assert.equal(await store.webhookOutbox.countWaiting(), 6);

          // A disabled subscription's events are neither claimed nor counted, and creates write none for it.
          const third = await subscribe(store, 'third');
          await store.plants.create([plant(1n)]);
          assert.equal(await store.webhookSubscriptions.setEnabled('third', false, 'paused'), true);
          await store.plants.create([plant(2n)]);
          assert.deepEqual(await claim(store, [third]), []);
          assert.equal(await store.webhookOutbox.countWaiting(), 10);
          assert.equal(await store.webhookSubscriptions.setEnabled('third', true, ''), true);
          assert.deepEqual((await claim(store, [third])).map((event) => event.plant.id), [1n]);
        }));

      it('settles deliveries, retries and failures: the attempt log, the events, the totals, the latest success and failure', () =>
        withStore(async (store) => {
          const hook = await subscribe(store, 'hook');
          await store.plants.create([plant(1n), plant(2n), plant(3n), plant(4n)]);
          const [e1, e2, e3, e4] = (await claim(store, [hook])) as [ClaimedWebhookEvent, ClaimedWebhookEvent, ClaimedWebhookEvent, ClaimedWebhookEvent];
          const t = await pastMoment();
          // Out of time order on purpose: the latest attempt sets the last success, the last failure and its error.
          const round = await settleAndClaim(
            store,
            [delivered(e1, t + 3), delivered(e2, t + 1), retried(e4, t + 4, 'timed out'), retried(e3, t + 2, 'HTTP 503', 0)],
            [hook],
          );
          assert.deepEqual(round.disabled, []);
          // Due again at once (retried after 0 ms), one attempt and one retry on.
          assert.deepEqual(
            round.claimed.map(({ id, attempts, retryIndex }) => ({ id, attempts, retryIndex })),
            [{ id: e3.id, attempts: 1, retryIndex: 1 }],
          );
          assert.deepEqual(await subscription(store, 'hook'), {
            name: 'hook',
            url: 'https://hook.example/hook',
            createdAt: (await subscription(store, 'hook')).createdAt,
            disabledAt: null,
            disabledReason: null,
            lastSuccessAt: new Date(t + 3),
            lastFailureAt: new Date(t + 4),
            lastError: 'timed out',
            waiting: 2,
            delivered: 2,
            retried: 2,
            failed: 0,
          });
          const log = await store.webhookSubscriptions.deliveries({ failedOnly: false, limit: 10 });
          assert.deepEqual(
            log.map(({ plantId, attempt: number, attemptedAt, status, error }) => ({ plantId, number, at: attemptedAt.getTime(), status, error })).sort((a, b) => a.at - b.at),
            [
              { plantId: 2n, number: 1, at: t + 1, status: 204, error: null },
              { plantId: 3n, number: 1, at: t + 2, status: null, error: 'HTTP 503' },
              { plantId: 1n, number: 1, at: t + 3, status: 204, error: null },
              { plantId: 4n, number: 1, at: t + 4, status: null, error: 'timed out' },
            ],
          );
          assert.ok(log.every((delivery) => delivery.subscription === 'hook' && delivery.eventId.startsWith('msg_prefixhook_')));
          assert.equal((await store.webhookSubscriptions.deliveries({ failedOnly: true, limit: 10 })).length, 2);

          // The schedule spent, but the subscription succeeded since the event was created: marked failed, not disabled.
          const [again] = round.claimed as [ClaimedWebhookEvent];
          assert.deepEqual((await settleAndClaim(store, [spent(again, t + 5, 'spent')], [hook])).disabled, []);
          // An earlier failure settled later moves neither the last failure nor its error back.
          await store.plants.create([plant(5n)]);
          const [e5] = (await claim(store, [hook])) as [ClaimedWebhookEvent];
          await settleAndClaim(store, [retried(e5, t, 'older')], []);
          const info = await subscription(store, 'hook');
          assert.deepEqual(
            { disabledAt: info.disabledAt, lastFailureAt: info.lastFailureAt, lastError: info.lastError, waiting: info.waiting, delivered: info.delivered, retried: info.retried, failed: info.failed },
            { disabledAt: null, lastFailureAt: new Date(t + 5), lastError: 'HTTP 500', waiting: 2, delivered: 2, retried: 3, failed: 1 },
          );
          assert.equal(await store.webhookOutbox.countWaiting(), 2);
          assert.equal((await store.webhookSubscriptions.deliveries({ name: 'hook', failedOnly: false, limit: 10 }))[0]?.attempt, 1);
          assert.equal((await store.webhookSubscriptions.deliveries({ name: 'hook', failedOnly: true, limit: 10 })).filter((d) => d.attempt === 2).length, 1);
        }));

      it('claims an event again once its lease runs out, and a released one at once, with no attempt counted', () =>
        withStore(async (store) => {
          const hook = await subscribe(store, 'hook');
          await store.plants.create([plant(1n), plant(2n)]);
          const [leased] = (await claim(store, [hook], 1, 300)) as [ClaimedWebhookEvent];
          const [other] = (await claim(store, [hook])) as [ClaimedWebhookEvent];
          assert.notEqual(other.id, leased.id);
          assert.deepEqual(await claim(store, [hook]), []);
          await sleep(500);
          assert.deepEqual(
            (await claim(store, [hook])).map(({ id, attempts, retryIndex }) => ({ id, attempts, retryIndex })),
            [{ id: leased.id, attempts: 0, retryIndex: 0 }],
          );
          const released = attempt(other, Date.now(), { kind: 'released' }, null);
          assert.deepEqual(
            (await settleAndClaim(store, [released], [hook])).claimed.map(({ id, attempts, retryIndex }) => ({ id, attempts, retryIndex })),
            [{ id: other.id, attempts: 0, retryIndex: 0 }],
          );
          assert.deepEqual(await store.webhookSubscriptions.deliveries({ failedOnly: false, limit: 10 }), []);
          const info = await subscription(store, 'hook');
          assert.deepEqual([info.waiting, info.delivered, info.retried, info.failed, info.lastFailureAt], [2, 0, 0, 0, null]);
        }));

      it('disables a subscription answering 410 Gone at once, the 410 taking precedence over a spent schedule in the same round in either order', () =>
        withStore(async (store) => {
          const [{ id: first, events: [a1, a2] }, { id: second, events: [b1, b2] }] = await twoSubscriptionsClaimed(store, 'first', 'second');
          const t = await pastMoment();
          const { disabled } = await settleAndClaim(store, [gone(a1, t + 2), spent(a2, t + 1, 'spent a'), spent(b1, t + 1, 'spent b'), gone(b2, t + 2)], [first, second]);
          assert.deepEqual(disabled.sort((x, y) => x.name.localeCompare(y.name)), [
            { name: 'first', reason: GONE },
            { name: 'second', reason: GONE },
          ]);
          for (const name of ['first', 'second']) {
            const info = await subscription(store, name);
            assert.deepEqual(
              { disabledAt: info.disabledAt, disabledReason: info.disabledReason, waiting: info.waiting, retried: info.retried, failed: info.failed },
              // The 410's event stays waiting, in case the subscription is enabled again.
              { disabledAt: new Date(t + 2), disabledReason: GONE, waiting: 1, retried: 1, failed: 1 },
              name,
            );
          }
          assert.deepEqual(await store.webhookOutbox.active(), []);
          assert.equal(await store.webhookOutbox.countWaiting(), 0);
          assert.deepEqual(await claim(store, [first, second]), []);
        }));

      it('disables a subscription whose schedule is spent only when it has had no success since the event was created', () =>
        withStore(async (store) => {
          const [{ events: [d1, d2] }, { events: [f1, f2] }] = await twoSubscriptionsClaimed(store, 'dead', 'flaky');
          const t = await pastMoment();
          // A success in the same round counts. Of two spent events of one batch, the later attempt gives the reason.
          const { disabled } = await settleAndClaim(store, [spent(d1, t + 1, 'first'), spent(d2, t + 3, 'second'), spent(f2, t + 2, 'flaky'), delivered(f1, t + 1)], []);
          assert.deepEqual(disabled, [{ name: 'dead', reason: 'second' }]);
          const info = await subscription(store, 'dead');
          assert.deepEqual(
            { disabledAt: info.disabledAt, disabledReason: info.disabledReason, failed: info.failed, lastFailureAt: info.lastFailureAt },
            { disabledAt: new Date(t + 3), disabledReason: 'second', failed: 2, lastFailureAt: new Date(t + 3) },
          );
          const kept = await subscription(store, 'flaky');
          assert.deepEqual([kept.disabledAt, kept.failed, kept.delivered], [null, 1, 1]);
          assert.deepEqual((await store.webhookOutbox.active()).map((active) => active.name), ['flaky']);
        }));
    });

    it('keeps data across close and reopen, and migrating again changes nothing', async () => {
      const db = await database.create();
      try {
        const first = await openStore(configFor(db.url));
        await first.plants.create([plant(INT64_MAX, 'durable', 'd'), plant(1n, 'one')]);
        await first.tokens.add(newToken('kept', hashOf('k'), { createdAt: new Date(0) }));
        await first.close();
        // Opened twice at once and once more after: every open migrates, and none disturbs the data.
        const [second, third] = await Promise.all([openStore(configFor(db.url)), openStore(configFor(db.url))]);
        await third?.close();
        try {
          assert.deepEqual(await second.plants.get(INT64_MAX), plant(INT64_MAX, 'durable', 'd'));
          assert.deepEqual(await second.plants.list({ limit: 10 }), [plant(1n, 'one'), plant(INT64_MAX, 'durable', 'd')]);
          assert.deepEqual(await second.tokens.find(hashOf('k')), { name: 'kept', hash: hashOf('k'), scopes: SCOPES, expiresAt: null });
          assert.deepEqual(await second.plants.create([plant(1n, 'one')]), [{ kind: 'existing', stored: plant(1n, 'one') }]);
        } finally {
          await second.close();
        }
        const fourth = await openStore(configFor(db.url));
        assert.deepEqual(await fourth.plants.get(1n), plant(1n, 'one'));
        await fourth.close();
      } finally {
        await db.cleanup();
      }
    });

    if (database.kind === 'postgres') {
      it('migrates a fresh database from many instances opening at once', async () => {
        const db = await database.create();
        try {
          const stores = await Promise.all(Array.from({ length: 6 }, () => openStore(configFor(db.url))));
          try {
            const outcomes = await Promise.all(stores.map((store, index) => store.plants.create([plant(BigInt(index), 'x')])));
            assert.deepEqual(outcomes.flat(), stores.map(() => ({ kind: 'created' })));
          } finally {
            await Promise.all(stores.map((store) => store.close()));
          }
        } finally {
          await db.cleanup();
        }
      });

      it('creates each id exactly once when two instances create the same ids concurrently', async () => {
        const db = await database.create();
        try {
          const a = await openStore(configFor(db.url));
          const b = await openStore(configFor(db.url));
          try {
            // Connections opened beforehand, so the batches below really run side by side.
            await Promise.all([a, b].flatMap((store) => Array.from({ length: 4 }, () => store.checkWritable())));
            const ids: bigint[] = [];
            for (let round = 0; round < 5; round += 1) {
              const roundIds = Array.from({ length: 300 }, (_, index) => BigInt(round * 300 + index) * 7919n - 1_000_000n);
              ids.push(...roundIds);
              // Each instance commits several overlapping batches at once, in opposite orders: a store that
              // locked ids in arrival order would deadlock here and fail some batches.
              const batches: Array<{ store: Store; rows: Plant[] }> = [];
              for (const [store, shift] of [
                [a, 0],
                [b, 1],
              ] as const) {
                for (let k = 0; k < 4; k += 1) {
                  const rows = roundIds.filter((_, index) => (index + k + shift) % 3 !== 0).map((id) => plant(id, 'same'));
                  batches.push({ store, rows: (k + shift) % 2 === 0 ? rows.reverse() : rows });
                }
              }
              const results = await Promise.all(batches.map(({ store, rows }) => store.plants.create(rows)));
              const created = new Map<bigint, number>();
              results.forEach((outcomes, index) => {
                const rows = (batches[index] as { rows: Plant[] }).rows;
                outcomes.forEach((outcome, row) => {
                  const id = (rows[row] as Plant).id;
                  if (outcome.kind === 'created') created.set(id, (created.get(id) ?? 0) + 1);
                  else assert.deepEqual(outcome, { kind: 'existing', stored: plant(id, 'same') });
                });
              });
              assert.equal(created.size, roundIds.length);
              assert.ok([...created.values()].every((count) => count === 1));
            }
            assert.equal((await b.plants.list({ limit: 10_000 })).length, ids.length);
          } finally {
            await a.close();
            await b.close();
          }
        } finally {
          await db.cleanup();
        }
      });

      it('refuses promptly with StorageUnavailableError when the server cannot be reached', async () => {
        const port = await freePort();
        const started = performance.now();
        await assert.rejects(openStore(configFor(`postgres://postgres:postgres@127.0.0.1:${port}/none`)), StorageUnavailableError);
        assert.ok(performance.now() - started < 5000);
      });
    }
  });
}
