/** The bound on writes waiting for storage is reached: the write is refused at once, nothing was stored. */
export class WriteQueueFullError extends Error {
  constructor() {
    super('the write queue is full; retry shortly');
    this.name = 'WriteQueueFullError';
  }
}

/** The bound and the refusal memory of several write queues, one per worker thread of an instance. */
export interface SharedWriteState {
  /**
   * Admits one write if the writes waiting in every queue together (this one's `depth` included) are below
   * queueLimit − `reserve`, counting it; false, counting nothing, otherwise. Streams admit with a reserve, so that
   * the last part of the bound is always there for single creates and deletes.
   */
  admit(reserve?: number): boolean;
  /** Writes this queue admitted that no longer wait (a batch handed to storage, a delete answered). */
  release(count: number): void;
  /** Writes waiting in every queue together, as counted against queueLimit. */
  depth(): number;
  /** When the latest batch to finish in any queue was refused by storage (Date.now()), or undefined. */
  refusedAt: number | undefined;
}

/** The bound of a queue that is its own alone: the writes it holds (`depth`) against queueLimit. */
export function ownBound(depth: () => number, queueLimit: number): SharedWriteState {
  return {
    admit: (reserve = 0) => depth() < queueLimit - reserve,
    release: () => undefined,
    depth,
    refusedAt: undefined,
  };
}

/**
 * How long a batch refused by storage (disk full, locked, unreachable) keeps the service unready when no batch has
 * committed since. It expires so that an instance taken out of rotation, and so sent no creates, becomes ready again
 * by itself once its heartbeat write succeeds; a create that is refused again restarts it.
 */
export const REFUSAL_MEMORY_MS = 5000;

/**
 * The part of queueLimit streams never take: single creates and deletes are admitted while streams fill the rest.
 * A quarter leaves streams most of the queue (one stream needs no more than its window, 1024 lines, to keep
 * commits full) and single creates thousands of places.
 */
export function reservedForSingles(queueLimit: number): number {
  return Math.min(queueLimit - 1, Math.max(1, Math.floor(queueLimit / 4)));
}
