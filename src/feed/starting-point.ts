/**
 * Where a stream asking for the changes after a cursor starts, decided from what the change log keeps: the same plain
 * rule for every store, read from its newest and oldest kept sequences (both dialects number changes one by one, with
 * no gaps, so the changes a cursor needs are exactly the sequences after it).
 */

/** Where a stream starts: after `cursor`; with `reset`, its first event is a reset to that cursor (the newest change). */
export interface StartingPoint {
  readonly cursor: bigint;
  readonly reset: boolean;
}

/**
 * - no cursor: the newest change, live from there;
 * - `0`: everything kept, from the oldest kept change on (nothing kept: live from the newest);
 * - a cursor past the newest change (one this store never wrote: another database, one restored from a backup): a reset;
 * - a cursor whose next change is gone (older than the oldest kept one, or pruned with every other): a reset;
 * - otherwise the changes after the cursor.
 */
export function startingPoint(requested: bigint | undefined, newest: bigint, oldestKept: bigint | undefined): StartingPoint {
  if (requested === undefined) return { cursor: newest, reset: false };
  if (requested > newest) return { cursor: newest, reset: true };
  if (requested === 0n) return { cursor: oldestKept === undefined ? newest : oldestKept - 1n, reset: false };
  const firstKept = oldestKept ?? newest + 1n;
  if (requested + 1n < firstKept) return { cursor: newest, reset: true };
  return { cursor: requested, reset: false };
}
