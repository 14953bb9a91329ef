import { openDatabase, pragmaValue, prepare, transaction, type Connection } from './connection.js';

/**
 * Schema versions, applied in order and recorded in PRAGMA user_version. Append only: a released step is
 * never edited, so every database reaches the same schema by the same path.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE plants (
     id   INTEGER PRIMARY KEY,  -- the rowid itself: a signed 64-bit integer, and the table's clustering key
     name TEXT NOT NULL,
     tag  TEXT
   );
   -- Listing by tag walks this index in id order: no sort, and a deep page costs what the first does.
   CREATE INDEX plants_by_tag ON plants (tag, id);
   CREATE TABLE tokens (
     name         TEXT PRIMARY KEY,
     hash         BLOB NOT NULL UNIQUE,
     created_at   INTEGER NOT NULL,
     last_used_at INTEGER
   );`,
  // One row, rewritten by every readiness check: a durable write that proves the database can take writes now.
  `CREATE TABLE plantstore_heartbeat (
     id         INTEGER PRIMARY KEY CHECK (id = 1),
     checked_at INTEGER NOT NULL
   );`,
  // Webhooks (src/webhooks/): subscriptions, the outbox of events (written in the transaction that stores the plants)
  // and the log of attempts. Times are Unix milliseconds. AUTOINCREMENT so that an event's row id, part of its
  // webhook-id (the subscriber's idempotency key), is never reused after a prune.
  `CREATE TABLE webhook_subscriptions (
     id              INTEGER PRIMARY KEY AUTOINCREMENT,
     name            TEXT NOT NULL UNIQUE,
     url             TEXT NOT NULL,
     secret          TEXT NOT NULL,
     previous_secret TEXT,
     previous_secret_until INTEGER,
     id_prefix       TEXT NOT NULL,
     created_at      INTEGER NOT NULL,
     disabled_at     INTEGER,
     disabled_reason TEXT,
     last_success_at INTEGER,
     last_failure_at INTEGER,
     last_error      TEXT,
     delivered_total INTEGER NOT NULL DEFAULT 0,
     retried_total   INTEGER NOT NULL DEFAULT 0,
     failed_total    INTEGER NOT NULL DEFAULT 0
   );
   CREATE TABLE webhook_events (
     id              INTEGER PRIMARY KEY AUTOINCREMENT,
     subscription_id INTEGER NOT NULL,
     plant_id        INTEGER NOT NULL,
     name            TEXT NOT NULL,
     tag             TEXT,
     created_at      INTEGER NOT NULL,
     attempts        INTEGER NOT NULL DEFAULT 0,
     retry_index     INTEGER NOT NULL DEFAULT 0,
     next_attempt_at INTEGER,  -- when due; NULL once delivered or failed
     lease_until     INTEGER,  -- claimed by a dispatcher until then
     delivered_at    INTEGER,
     failed_at       INTEGER
   );
   -- The dispatcher's claim walks this: due events of one subscription, oldest due first. Only waiting events are in it.
   CREATE INDEX webhook_events_due ON webhook_events (subscription_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
   CREATE INDEX webhook_events_delivered ON webhook_events (delivered_at) WHERE delivered_at IS NOT NULL;
   CREATE TABLE webhook_attempts (
     id              INTEGER PRIMARY KEY AUTOINCREMENT,
     event_id        INTEGER NOT NULL,
     subscription_id INTEGER NOT NULL,
     attempt         INTEGER NOT NULL,
     attempted_at    INTEGER NOT NULL,
     status          INTEGER,
     error           TEXT
   );
   CREATE INDEX webhook_attempts_by_event ON webhook_attempts (event_id);
   CREATE INDEX webhook_attempts_by_subscription ON webhook_attempts (subscription_id, id);`,
  // Least privilege: what a token may do (scope names separated by spaces; '' is none, so a row written without them
  // can do nothing) and until when (Unix milliseconds; NULL is never). The tokens made before could do everything
  // there was, and still can: the three scopes of that time are written out here, never read from the code, so that a
  // scope added later is not granted to them by this step.
  `ALTER TABLE tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT '';
   ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
   UPDATE tokens SET scopes = 'plants:read plants:create plants:delete';`,
  // Tracing (src/tracing/): the W3C traceparent of the request that created the plant, so that each delivery of its
  // event continues that trace, after a restart or from another process too. NULL when the create was not traced.
  `ALTER TABLE webhook_events ADD COLUMN traceparent TEXT;`,
  // The change feed (src/feed/, GET /plants/events): every create and delete, written in the transaction that makes
  // it; one writer, so sequence order is commit order. name is NULL for a delete. A later step rebuilds it.
  `CREATE TABLE plant_changes (
     seq        INTEGER PRIMARY KEY AUTOINCREMENT,
     kind       TEXT NOT NULL CHECK (kind IN ('created', 'deleted')),
     plant_id   INTEGER NOT NULL,
     name       TEXT,
     tag        TEXT,
     changed_at INTEGER NOT NULL
   );
   CREATE INDEX plant_changes_by_time ON plant_changes (changed_at);`,
  // The tag index, keyed by (tag, id) as before but with the id stored once: every entry of a SQLite index ends with
  // the rowid, which is the plant id, so naming id as a column stored it twice. Plants without a tag are never
  // listed by tag and are left out: each such create writes one B-tree page fewer. `tag = ?` implies the index's
  // condition, so listing by tag still walks it (test/storage/query-plans.test.ts).
  `DROP INDEX plants_by_tag;
   CREATE INDEX plants_by_tag ON plants (tag) WHERE tag IS NOT NULL;`,
  // The change log rebuilt with fewer writes per create. Sequences are rowids, the newest plus one, without
  // AUTOINCREMENT's sqlite_sequence row updated by every insert: pruning never deletes the newest change, so a sequence
  // is still never reused. And no index on time: pruning by age searches the log by sequence, since a change's time
  // never falls as its sequence rises (src/storage/sqlite/changes.ts). Dropping the old table drops its index and
  // its sqlite_sequence row.
  `CREATE TABLE plant_changes_rebuilt (
     seq        INTEGER PRIMARY KEY,
     kind       TEXT NOT NULL CHECK (kind IN ('created', 'deleted')),
     plant_id   INTEGER NOT NULL,
     name       TEXT,
     tag        TEXT,
     changed_at INTEGER NOT NULL
   );
   INSERT INTO plant_changes_rebuilt (seq, kind, plant_id, name, tag, changed_at)
     SELECT seq, kind, plant_id, name, tag, changed_at FROM plant_changes ORDER BY seq;
   DROP TABLE plant_changes;
   ALTER TABLE plant_changes_rebuilt RENAME TO plant_changes;`,
];

export const SQLITE_SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Brings the schema to the current version, or to `target` (tests make databases of an earlier version with it). A
 * database already past `target` is left alone; one newer than this plantstore is refused.
 */
export function migrate(db: Connection, target: number = MIGRATIONS.length): void {
  // IMMEDIATE takes the write lock first, so two processes starting together migrate one after the other.
  transaction(db, () => {
    const current = pragmaValue(db, 'user_version') as number;
    if (current > MIGRATIONS.length) {
      throw new Error(`database schema version ${current} is newer than this plantstore (${MIGRATIONS.length}); upgrade plantstore`);
    }
    for (let version = current; version < target; version += 1) {
      db.exec(MIGRATIONS[version] as string);
    }
    if (target > current) db.exec(`PRAGMA user_version = ${target}`);
  });
}

/** One table or index as sqlite_schema lists it; the SQL text is kept as the migration wrote it. */
export interface SchemaObject {
  readonly type: string;
  readonly name: string;
  readonly tableName: string;
  readonly sql: string | null;
}

/** The tables and indexes of `schema` (`main` or an attached name), SQLite's internal ones left out. */
export function schemaObjects(db: Connection, schema = 'main'): SchemaObject[] {
  return prepare<[], SchemaObject>(
    db,
    `SELECT type, name, tbl_name AS tableName, sql FROM "${schema.replaceAll('"', '""')}".sqlite_schema
     WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name`,
  ).all();
}

/** What a plantstore database of schema `version` holds: the migrations up to it, applied to an empty database. */
export function expectedSchemaObjects(version: number): SchemaObject[] {
  const db = openDatabase(':memory:');
  try {
    for (let step = 0; step < version; step += 1) db.exec(MIGRATIONS[step] as string);
    return schemaObjects(db);
  } finally {
    db.close();
  }
}
