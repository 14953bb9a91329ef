import type pg from 'pg';

/** Schema versions, applied in order; append only. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE plants (
     id   BIGINT PRIMARY KEY,
     name TEXT NOT NULL,
     tag  TEXT
   );
   -- Listing by tag walks this index in id order: no sort, and a deep page costs what the first does.
   CREATE INDEX plants_by_tag ON plants (tag, id);
   CREATE TABLE tokens (
     name         TEXT PRIMARY KEY,
     hash         BYTEA NOT NULL UNIQUE,
     created_at   TIMESTAMPTZ NOT NULL,
     last_used_at TIMESTAMPTZ
   );`,
  // One row, rewritten by every readiness check of every replica: a committed write proves the database takes
  // writes now (not a standby, not read-only, not out of space).
  `CREATE TABLE plantstore_heartbeat (
     id         INTEGER PRIMARY KEY CHECK (id = 1),
     checked_at TIMESTAMPTZ NOT NULL
   );`,
  // Webhooks (src/webhooks/): subscriptions, the outbox of events (written by the statement that stores the plants)
  // and the log of attempts. Identity ids are never reused, so an event's webhook-id never repeats. No foreign keys:
  // an event row must never make a batch of plants fail (a subscription removed while its events are written); the
  // dispatcher ignores events whose subscription is gone, and pruning removes them.
  `CREATE TABLE webhook_subscriptions (
     id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
     name            TEXT NOT NULL UNIQUE,
     url             TEXT NOT NULL,
     secret          TEXT NOT NULL,
     previous_secret TEXT,
     previous_secret_until TIMESTAMPTZ,
     id_prefix       TEXT NOT NULL,
     created_at      TIMESTAMPTZ NOT NULL,
     disabled_at     TIMESTAMPTZ,
     disabled_reason TEXT,
     last_success_at TIMESTAMPTZ,
     last_failure_at TIMESTAMPTZ,
     last_error      TEXT,
     delivered_total BIGINT NOT NULL DEFAULT 0,
     retried_total   BIGINT NOT NULL DEFAULT 0,
     failed_total    BIGINT NOT NULL DEFAULT 0
   );
   CREATE TABLE webhook_events (
     id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
     subscription_id BIGINT NOT NULL,
     plant_id        BIGINT NOT NULL,
     name            TEXT NOT NULL,
     tag             TEXT,
     created_at      TIMESTAMPTZ NOT NULL,
     attempts        INTEGER NOT NULL DEFAULT 0,
     retry_index     INTEGER NOT NULL DEFAULT 0,
     next_attempt_at TIMESTAMPTZ,
     lease_until     TIMESTAMPTZ,
     delivered_at    TIMESTAMPTZ,
     failed_at       TIMESTAMPTZ
   );
   CREATE INDEX webhook_events_due ON webhook_events (subscription_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
   CREATE INDEX webhook_events_delivered ON webhook_events (delivered_at) WHERE delivered_at IS NOT NULL;
   CREATE TABLE webhook_attempts (
     id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
     event_id        BIGINT NOT NULL,
     subscription_id BIGINT NOT NULL,
     attempt         INTEGER NOT NULL,
     attempted_at    TIMESTAMPTZ NOT NULL,
     status          INTEGER,
     error           TEXT
   );
   CREATE INDEX webhook_attempts_by_event ON webhook_attempts (event_id);
   CREATE INDEX webhook_attempts_by_subscription ON webhook_attempts (subscription_id, id);`,
  // Least privilege: what a token may do (scope names separated by spaces; '' is none, so a row written without them
  // can do nothing) and until when (NULL is never). The tokens made before could do everything there was, and still
  // can: the three scopes of that time are written out here, never read from the code, so that a scope added later
  // is not granted to them by this step.
  `ALTER TABLE tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT '';
   ALTER TABLE tokens ADD COLUMN expires_at TIMESTAMPTZ;
   UPDATE tokens SET scopes = 'plants:read plants:create plants:delete';`,
  // Tracing (src/tracing/): the W3C traceparent of the request that created the plant, so that each delivery of its
  // event continues that trace, after a restart or from another replica too. NULL when the create was not traced.
  `ALTER TABLE webhook_events ADD COLUMN traceparent TEXT;`,
  // The change feed (src/feed/, GET /plants/events): every create and delete, written by the statement that makes it.
  // An identity or a sequence is not commit-ordered across concurrent transactions (one may take 11, commit, and be
  // read before another that took 10 commits), and a reader that has passed 11 would never see 10. So the sequence
  // comes from a counter row that the change's statement updates last: its row lock is held until commit, so change
  // writers commit one after another and numbers are handed out in commit order, without gaps, across every replica.
  // The statement-level trigger NOTIFYs every listening replica when the transaction commits (src/feed/).
  `CREATE TABLE plant_changes (
     seq        BIGINT PRIMARY KEY,
     kind       TEXT NOT NULL CHECK (kind IN ('created', 'deleted')),
     plant_id   BIGINT NOT NULL,
     name       TEXT,
     tag        TEXT,
     changed_at TIMESTAMPTZ NOT NULL
   );
   CREATE INDEX plant_changes_by_time ON plant_changes (changed_at);
   CREATE TABLE plant_change_counter (
     id   INTEGER PRIMARY KEY CHECK (id = 1),
     last BIGINT NOT NULL
   );
   INSERT INTO plant_change_counter (id, last) VALUES (1, 0);
   CREATE FUNCTION plantstore_changes_notify() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF EXISTS (SELECT 1 FROM new_changes) THEN PERFORM pg_notify('plantstore_changes', ''); END IF;
     RETURN NULL;
   END $$;
   CREATE TRIGGER plant_changes_notify AFTER INSERT ON plant_changes
     REFERENCING NEW TABLE AS new_changes FOR EACH STATEMENT EXECUTE FUNCTION plantstore_changes_notify();`,
  // Plants without a tag are never listed by tag: left out of the tag index, each such create writes one index page
  // fewer. `tag = $1` implies the index's condition, so listing by tag still walks it (test/storage/query-plans.test.ts).
  `DROP INDEX plants_by_tag;
   CREATE INDEX plants_by_tag ON plants (tag, id) WHERE tag IS NOT NULL;`,
];

export const POSTGRES_SCHEMA_VERSION = MIGRATIONS.length;

/** Any fixed number: every plantstore replica takes the same lock, so concurrent starts migrate one at a time. */
export const MIGRATION_LOCK = 7_170_731_001;

/**
 * Brings the schema to the current version, or to `target` (tests make databases of an earlier version with it). The
 * session-level advisory lock makes replicas that start together wait for each other; the lock goes with the
 * session if this one dies, so a crashed migration never blocks the rest.
 */
export async function migrate(client: pg.ClientBase, target: number = MIGRATIONS.length): Promise<void> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    await client.query('CREATE TABLE IF NOT EXISTS plantstore_schema (version INTEGER NOT NULL)');
    const { rows } = await client.query<{ version: number }>('SELECT max(version) AS version FROM plantstore_schema');
    const current = rows[0]?.version ?? 0;
    if (current > MIGRATIONS.length) {
      throw new Error(`database schema version ${current} is newer than this plantstore (${MIGRATIONS.length}); upgrade plantstore`);
    }
    for (let version = current; version < target; version += 1) {
      await client.query('BEGIN');
      try {
        await client.query(MIGRATIONS[version] as string);
        await client.query('INSERT INTO plantstore_schema (version) VALUES ($1)', [version + 1]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    }
  } finally {
    // On a broken connection this fails too, and the server has already released the lock with the session.
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
  }
}
