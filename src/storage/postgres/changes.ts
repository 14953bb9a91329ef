import pg from 'pg';
import { pruneThrough, toChange, type ChangeLog, type ChangeRetention, type ChangeRow, type PlantChange } from '../change-store.js';
import { connectionConfig, type PostgresConfig, type PostgresTimeouts, type Query } from './connection.js';

/** The channel the change log's trigger notifies on each commit that wrote changes (migration 6). */
const CHANGES_CHANNEL = 'plantstore_changes';

/** Rows deleted per pruning statement. */
const PRUNE_CHUNK = 5000;

/** How long to wait before connecting the listener again after it was lost. */
const RELISTEN_DELAY_MS = 1000;

/**
 * The change log of PostgreSQL: rows written by the plant sub-store's statements (./plants.ts), read through the
 * pool, and commits heard through one LISTEN connection of this store's own, opened on the first listener: a commit
 * made by any replica on the database is heard by every replica, once, when it commits.
 */
export class PostgresChanges implements ChangeLog, ChangeRetention {
  readonly #query: Query;
  readonly #config: PostgresConfig;
  readonly #timeouts: PostgresTimeouts;
  readonly #listeners = new Set<() => void>();
  #listener: pg.Client | undefined;
  #relisten: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(query: Query, config: PostgresConfig, timeouts: PostgresTimeouts) {
    this.#query = query;
    this.#config = config;
    this.#timeouts = timeouts;
  }

  async changesAfter(sequence: bigint, limit: number): Promise<PlantChange[]> {
    const { rows } = await this.#query<ChangeRow>(
      'SELECT seq, kind, plant_id, name, tag, changed_at FROM plant_changes WHERE seq > $1 ORDER BY seq LIMIT $2',
      [sequence.toString(), limit],
    );
    return rows.map(toChange);
  }

  async newestSequence(): Promise<bigint> {
    const { rows } = await this.#query<{ newest: bigint | null }>('SELECT max(seq) AS newest FROM plant_changes');
    return rows[0]?.newest ?? 0n;
  }

  async oldestRetained(): Promise<bigint | undefined> {
    const { rows } = await this.#query<{ oldest: bigint | null }>('SELECT min(seq) AS oldest FROM plant_changes');
    return rows[0]?.oldest ?? undefined;
  }

  async pruneChanges(maxAgeMs: number, maxCount: number): Promise<number> {
    const { rows } = await this.#query<{ newest: bigint | null; expired: bigint | null }>(
      `SELECT (SELECT max(seq) FROM plant_changes) AS newest,
              (SELECT seq FROM plant_changes WHERE changed_at < now() - make_interval(secs => $1::float8 / 1000) ORDER BY changed_at DESC LIMIT 1) AS expired`,
      [maxAgeMs],
    );
    const through = pruneThrough(rows[0]?.newest ?? 0n, maxCount, rows[0]?.expired ?? undefined);
    if (through === undefined) return 0;
    let deleted = 0;
    for (;;) {
      const result = await this.#query(
        'DELETE FROM plant_changes WHERE seq IN (SELECT seq FROM plant_changes WHERE seq <= $1 ORDER BY seq LIMIT $2)',
        [through.toString(), PRUNE_CHUNK],
      );
      deleted += result.rowCount ?? 0;
      if ((result.rowCount ?? 0) < PRUNE_CHUNK) return deleted;
    }
  }

  /**
   * Heard on the LISTEN connection. While it is lost (the database restarting), nothing is heard: the feed's slow
   * fallback poll covers that time, and each new connection also calls the listeners once, for what committed meanwhile.
   */
  onCommitted(listener: () => void): () => void {
    this.#listeners.add(listener);
    if (this.#listener === undefined && this.#relisten === undefined) void this.#listen();
    return () => this.#listeners.delete(listener);
  }

  #heard(): void {
    for (const listener of this.#listeners) listener();
  }

  async #listen(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client(connectionConfig(this.#config, this.#timeouts));
    this.#listener = client;
    const lost = () => {
      if (this.#listener !== client) return;
      this.#listener = undefined;
      client.removeAllListeners('notification');
      void client.end().catch(() => undefined);
      if (this.#closed) return;
      this.#relisten = setTimeout(() => {
        this.#relisten = undefined;
        void this.#listen();
      }, RELISTEN_DELAY_MS);
      this.#relisten.unref();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', (message) => {
      if (message.channel === CHANGES_CHANNEL) this.#heard();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      // Whatever committed while nobody listened.
      this.#heard();
    } catch {
      lost();
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#relisten);
    const client = this.#listener;
    this.#listener = undefined;
    await client?.end().catch(() => undefined);
  }
}
