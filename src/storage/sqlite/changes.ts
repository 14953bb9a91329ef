import { setTimeout as sleep } from 'node:timers/promises';
import { pruneThrough, toChange, type ChangeLog, type ChangeRetention, type PlantChange } from '../change-store.js';
import type { Plant } from '../../plant.js';
import { prepare, prepareValue, prepareWrite, type Connection, type ReadRunner, type SQLInputValue, type WriteRunner, type WriteStatement } from './connection.js';

const INSERT_CHANGES = 'INSERT INTO plant_changes (kind, plant_id, name, tag, changed_at) VALUES';

/** The most created changes one INSERT writes (4 parameters each, far below SQLite's limit of 32,766). */
const MAX_CHUNK = 64;

function isAscending(plants: readonly Plant[]): boolean {
  for (let index = 1; index < plants.length; index += 1) if ((plants[index - 1] as Plant).id > (plants[index] as Plant).id) return false;
  return true;
}

/** Rows deleted per pruning transaction: short enough that creates waiting for the write lock never notice. */
const PRUNE_CHUNK = 5000;

interface SqliteChangeRow {
  readonly seq: bigint;
  readonly kind: string;
  readonly plant_id: bigint;
  readonly name: string | null;
  readonly tag: string | null;
  readonly changed_at: bigint;
}

/**
 * The change log's reads on a read connection: the single-threaded store's, and a worker thread's
 * (./delegating-store.ts), which is told of commits by its instance's writer rather than by this class. Reads never
 * go past `durableThrough`, the newest sequence announced durable (advance()): a change committed but not yet
 * synced is visible to a read connection, and must not be published before it is durable.
 */
export class SqliteChangeReads implements ChangeLog {
  readonly #read: ReadRunner;
  readonly #statements;
  /** What was in the file when it was opened is durable: whatever a crash took is gone from the file too. */
  #durableThrough: bigint;

  constructor(reader: Connection, read: ReadRunner) {
    this.#read = read;
    this.#statements = {
      after: prepare<[bigint, bigint, number], SqliteChangeRow>(
        reader,
        'SELECT seq, kind, plant_id, name, tag, changed_at FROM plant_changes WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?',
        { bigInts: true },
      ),
      newest: prepareValue<[], bigint | null>(reader, 'SELECT max(seq) FROM plant_changes', { bigInts: true }),
      oldest: prepareValue<[], bigint | null>(reader, 'SELECT min(seq) FROM plant_changes', { bigInts: true }),
    };
    this.#durableThrough = this.#statements.newest.get() ?? 0n;
  }

  /** The newest sequence known durable. */
  get durableThrough(): bigint {
    return this.#durableThrough;
  }

  /** Changes through `sequence` are durable (and may be published); never moves back. */
  advance(sequence: bigint): void {
    if (sequence > this.#durableThrough) this.#durableThrough = sequence;
  }

  changesAfter(sequence: bigint, limit: number): Promise<PlantChange[]> {
    return this.#read(() =>
      this.#statements.after
        .all(sequence, this.#durableThrough, limit)
        .map((row) => toChange({ ...row, changed_at: new Date(Number(row.changed_at)) })),
    );
  }

  newestSequence(): Promise<bigint> {
    return this.#read(() => {
      const newest = this.#statements.newest.get() ?? 0n;
      return newest < this.#durableThrough ? newest : this.#durableThrough;
    });
  }

  oldestRetained(): Promise<bigint | undefined> {
    return this.#read(() => this.#statements.oldest.get() ?? undefined);
  }
}

/**
 * The change log of SQLite: rows written by the plant sub-store inside its own transactions (`recordCreated`,
 * `recordDeleted`, on the write connection), read on the read connection, pruned in short transactions. The one
 * writer makes the sequence (the rowid: the newest plus one) commit-ordered by itself.
 */
export class SqliteChanges extends SqliteChangeReads implements ChangeRetention {
  readonly #write: WriteRunner;
  readonly #writes;
  readonly #listeners = new Set<() => void>();
  readonly #writer: Connection;
  /** One INSERT of 2^k created changes for each k used so far (createdRows). */
  readonly #insertCreated = new Map<number, WriteStatement<SQLInputValue[]>>();

  constructor(reader: Connection, writer: Connection, runners: { readonly read: ReadRunner; readonly write: WriteRunner }) {
    super(reader, runners.read);
    this.#write = runners.write;
    this.#writer = writer;
    this.#writes = {
      insert: prepareWrite<[string, bigint, string | null, string | null, number]>(writer, `${INSERT_CHANGES} (?, ?, ?, ?, ?)`),
      newest: prepareValue<[], bigint | null>(writer, 'SELECT max(seq) FROM plant_changes', { bigInts: true }),
      lastInserted: prepareValue<[], bigint>(writer, 'SELECT last_insert_rowid()', { bigInts: true }),
      // The newest change's time: what the next batch's time may not fall below (recordCreated).
      newestAt: prepareValue<[], number | null>(writer, 'SELECT changed_at FROM plant_changes ORDER BY seq DESC LIMIT 1'),
      oldestSeq: prepareValue<[], bigint | null>(writer, 'SELECT min(seq) FROM plant_changes', { bigInts: true }),
      // The first change at or after a sequence (there are gaps): one probe of pruning's search.
      firstFrom: prepare<[bigint], { readonly seq: bigint; readonly changed_at: bigint }>(
        writer,
        'SELECT seq, changed_at FROM plant_changes WHERE seq >= ? ORDER BY seq LIMIT 1',
        { bigInts: true },
      ),
      pruneChunk: prepareWrite<[bigint, number]>(
        writer,
        'DELETE FROM plant_changes WHERE seq IN (SELECT seq FROM plant_changes WHERE seq <= ? ORDER BY seq LIMIT ?)',
      ),
    };
  }

  /**
   * The time a change written now is stamped with: `now`, or the newest change's time if the clock stepped back
   * behind it. So times never fall as sequences rise, and pruning by age finds the newest expired change by a
   * search over sequences (newestExpired) rather than through an index on time, which every create would pay a
   * B-tree insert for. Read in the writing transaction, so writers in other processes keep the order too.
   */
  #stamp(now: number): number {
    const newest = this.#writes.newestAt.get();
    return newest !== null && newest !== undefined && newest > now ? newest : now;
  }

  /** Inside a create's transaction: one change per plant created by it. Answers the last sequence written, if any. */
  recordCreated(plants: readonly Plant[], clock: number): bigint | undefined {
    if (plants.length === 0) return undefined;
    const now = this.#stamp(clock);
    // Numbered in id order, as PostgreSQL numbers a batch (a multi-row INSERT numbers its rows in the order listed).
    const ordered = isAscending(plants) ? plants : [...plants].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    // A statement per power of two in the count (25 rows: 16, 8 and 1) rather than one per row: SQLite's work per
    // statement is paid a few times per batch.
    let at = 0;
    for (let chunk = MAX_CHUNK; chunk >= 1; chunk >>= 1) {
      while (ordered.length - at >= chunk) {
        const values: SQLInputValue[] = [];
        for (let index = at; index < at + chunk; index += 1) {
          const plant = ordered[index] as Plant;
          values.push(plant.id, plant.name, plant.tag, now);
        }
        this.#createdRows(chunk).run(...values);
        at += chunk;
      }
    }
    return this.#writes.lastInserted.get();
  }

  /** The INSERT of `count` created changes, prepared on first use. */
  #createdRows(count: number): WriteStatement<SQLInputValue[]> {
    let statement = this.#insertCreated.get(count);
    if (statement === undefined) {
      statement = prepareWrite<SQLInputValue[]>(this.#writer, `${INSERT_CHANGES} ${Array.from({ length: count }, () => "('created', ?, ?, ?, ?)").join(', ')}`);
      this.#insertCreated.set(count, statement);
    }
    return statement;
  }

  /** Inside a delete's transaction, once it deleted a row. Answers the sequence written. */
  recordDeleted(id: bigint, now: number): bigint | undefined {
    this.#writes.insert.run('deleted', id, null, null, this.#stamp(now));
    return this.#writes.lastInserted.get();
  }

  /**
   * The newest sequence of a change stamped before `cutoff`, if any: a binary search over sequences (gaps and all),
   * exact since stamps never fall as sequences rise (#stamp): a probe per bit of the sequences' range at most, once per pruning.
   */
  #newestExpired(cutoff: number, newest: bigint): bigint | undefined {
    const oldest = this.#writes.oldestSeq.get();
    if (oldest === null || oldest === undefined) return undefined;
    const first = this.#writes.firstFrom.get(oldest);
    if (first === undefined || Number(first.changed_at) >= cutoff) return undefined;
    let expired = first.seq;
    let low = expired + 1n;
    let high = newest;
    while (low <= high) {
      const middle = (low + high) / 2n;
      const row = this.#writes.firstFrom.get(middle);
      if (row !== undefined && Number(row.changed_at) < cutoff) {
        expired = row.seq;
        low = row.seq + 1n;
      } else high = middle - 1n;
    }
    return expired;
  }

  onCommitted(listener: () => void): () => void {
    this.#listeners.add(listener);
    queueMicrotask(() => {
      if (this.#listeners.has(listener)) listener();
    });
    return () => this.#listeners.delete(listener);
  }

  /**
   * THE place where the feed is woken on SQLite: called by SqlitePlants once a write that recorded changes through
   * `through` is durable, that is committed and covered by a WAL sync that began after the commit (SqliteStore's
   * write resolves only then). It lets reads go up to `through` and wakes the listeners: a change handed out before
   * its sync could be one a crash loses.
   */
  changesDurable(through: bigint): void {
    this.advance(through);
    for (const listener of this.#listeners) listener();
  }

  async pruneChanges(maxAgeMs: number, maxCount: number): Promise<number> {
    const through = await this.#write(() => {
      const newest = this.#writes.newest.get() ?? 0n;
      return pruneThrough(newest, maxCount, this.#newestExpired(Date.now() - maxAgeMs, newest));
    });
    if (through === undefined) return 0;
    let deleted = 0;
    for (;;) {
      // Short transactions, between which creates and reads go on.
      const chunk = await this.#write(() => this.#writes.pruneChunk.run(through, PRUNE_CHUNK).changes);
      deleted += chunk;
      if (chunk < PRUNE_CHUNK) return deleted;
      await sleep(0);
    }
  }
}
