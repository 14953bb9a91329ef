import { prepareWrite, type Connection } from './connection.js';

/**
 * The SQLite store's own write, the heartbeat, on the one connection that writes (plants.ts, tokens.ts,
 * webhook-subscriptions.ts and webhook-outbox.ts write theirs on the same connection): one durable commit that either takes the write lock at once or
 * throws SQLITE_BUSY having changed nothing (the connection's busy timeout is 0), so the store can retry it later
 * without blocking the event loop.
 */
export class SqliteHeartbeat {
  readonly #statements;

  constructor(db: Connection) {
    this.#statements = {
      heartbeat: prepareWrite<[number]>(
        db,
        'INSERT INTO plantstore_heartbeat (id, checked_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at',
      ),
    };
  }

  /** One durable commit of the heartbeat row. */
  write(checkedAt: number): void {
    this.#statements.heartbeat.run(checkedAt);
  }
}
