import Database from 'better-sqlite3';

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
];

export const SQLITE_SCHEMA_VERSION = MIGRATIONS.length;

export function migrate(db: Database.Database): void {
  // IMMEDIATE takes the write lock first, so two processes starting together migrate one after the other.
  db.transaction(() => {
    const current = db.pragma('user_version', { simple: true }) as number;
    if (current > MIGRATIONS.length) {
      throw new Error(`database schema version ${current} is newer than this plantstore (${MIGRATIONS.length}); upgrade plantstore`);
    }
    for (let version = current; version < MIGRATIONS.length; version += 1) {
      db.exec(MIGRATIONS[version] as string);
    }
    db.pragma(`user_version = ${MIGRATIONS.length}`);
  }).immediate();
}

/** One table or index as sqlite_schema lists it; the SQL text is kept as the migration wrote it. */
export interface SchemaObject {
  readonly type: string;
  readonly name: string;
  readonly tableName: string;
  readonly sql: string | null;
}

/** The tables and indexes of `schema` (`main` or an attached name), SQLite's internal ones left out. */
export function schemaObjects(db: Database.Database, schema = 'main'): SchemaObject[] {
  return db
    .prepare<[], SchemaObject>(
      `SELECT type, name, tbl_name AS tableName, sql FROM "${schema.replaceAll('"', '""')}".sqlite_schema
       WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name`,
    )
    .all();
}

/** What a plantstore database of schema `version` holds: the migrations up to it, applied to an empty database. */
export function expectedSchemaObjects(version: number): SchemaObject[] {
  const db = new Database(':memory:');
  try {
    for (let step = 0; step < version; step += 1) db.exec(MIGRATIONS[step] as string);
    return schemaObjects(db);
  } finally {
    db.close();
  }
}
