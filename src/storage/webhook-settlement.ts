import type { WebhookAttemptResult } from './webhook-store.js';

/**
 * What a round of webhook attempt results changes, decided here once in plain code; each database only applies it
 * (src/storage/sqlite/webhook-outbox.ts, src/storage/postgres/webhook-outbox.ts), so both keep the same records whatever order
 * the results come in: the dispatcher lists them as attempts finish, and attempts finish out of order.
 */

/** One attempt made: its line in the attempt log, and what becomes of its event. */
interface SettledAttempt {
  readonly eventId: bigint;
  readonly subscriptionId: bigint;
  /** 1 for the event's first attempt. */
  readonly attempt: number;
  readonly attemptedAt: Date;
  readonly status: number | null;
  readonly error: string | null;
  /** delivered: done; retry: due again `retryInMs` later, one step on in the schedule; failed: given up on. */
  readonly outcome: 'delivered' | 'retry' | 'failed';
  /** Whole milliseconds; 0 unless a retry. */
  readonly retryInMs: number;
}

/** What a round adds to one subscription's totals, and its latest success and latest failure in that round. */
interface SubscriptionTally {
  readonly subscriptionId: bigint;
  readonly delivered: number;
  readonly retried: number;
  readonly failed: number;
  /** The latest attempt that succeeded; null when none did. */
  readonly lastSuccessAt: Date | null;
  /**
   * The latest attempt that failed, and its error; null when none did. A store keeps it only if it is no earlier
   * than the one it holds: an attempt that took long may be settled a round after a later one.
   */
  readonly lastFailureAt: Date | null;
  readonly lastError: string | null;
}

/** A subscription to disable; a store leaves one already disabled as it is. */
interface SubscriptionDisable {
  readonly subscriptionId: bigint;
  readonly at: Date;
  readonly reason: string;
  /**
   * For a spent schedule: disable only if the subscription has had no success since this moment (the event's
   * creation), counting this round's. Null for a 410 Gone: at once.
   */
  readonly unlessSuccessSince: Date | null;
}

export interface SettlementPlan {
  /** Events given back unattempted: their lease ends, and no attempt is counted. */
  readonly released: readonly bigint[];
  /** In the order of the results. */
  readonly attempts: readonly SettledAttempt[];
  /** One per subscription attempted, in ascending id order (so replicas settling at once lock rows in one order). */
  readonly tallies: readonly SubscriptionTally[];
  /** At most one per subscription, in ascending id order; to apply after the tallies, whose successes they count. */
  readonly disables: readonly SubscriptionDisable[];
}

interface Tally {
  delivered: number;
  retried: number;
  failed: number;
  lastSuccessAt: Date | null;
  lastFailure: WebhookAttemptResult | null;
}

/** Negative, zero or positive as `a` is earlier than, at the same time as, or later than `b`. */
function compareTimes(a: Date, b: Date): number {
  return a.getTime() - b.getTime();
}

function compareIds(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The later attempt; of two at the same millisecond, the one of the later event, so that no order of results matters. */
function isLaterAttempt(a: WebhookAttemptResult, b: WebhookAttemptResult): boolean {
  return (compareTimes(a.attemptedAt, b.attemptedAt) || compareIds(a.event.id, b.event.id)) > 0;
}

/**
 * Which of two spent events of one subscription decides its disable: the one created last, since a subscription
 * with no success since then has had none since any earlier one either, so it disables whenever any of them would;
 * of events created together, the later attempt (its reason names the latest error), then the later event.
 */
function isDecidingSpent(a: WebhookAttemptResult, b: WebhookAttemptResult): boolean {
  return (compareTimes(a.event.createdAt, b.event.createdAt) || compareTimes(a.attemptedAt, b.attemptedAt) || compareIds(a.event.id, b.event.id)) > 0;
}

/**
 * The records a round of results makes. Released results count nothing. Attempts count toward their subscription's
 * totals; its last success and last failure are the latest attempts of each kind (by attempt time, not result order).
 * A subscription is disabled at most once per round: a 410 Gone at once, from its earliest 410 of the round, and
 * before a spent schedule, since the subscriber has said it wants nothing more whatever its past successes; failing
 * that, a spent schedule if the subscription has had no success since the event was created.
 */
export function planSettlement(results: readonly WebhookAttemptResult[]): SettlementPlan {
  const released: bigint[] = [];
  const attempts: SettledAttempt[] = [];
  const tallies = new Map<bigint, Tally>();
  /** Per subscription, the result that would disable it, and why. */
  const gone = new Map<bigint, { result: WebhookAttemptResult; reason: string }>();
  const spent = new Map<bigint, { result: WebhookAttemptResult; reason: string }>();
  for (const result of results) {
    const { event, attemptedAt, status, error, outcome } = result;
    if (outcome.kind === 'released') {
      released.push(event.id);
      continue;
    }
    const retryInMs = outcome.kind === 'retry' ? Math.round(outcome.retryInMs) : 0;
    attempts.push({ eventId: event.id, subscriptionId: event.subscriptionId, attempt: event.attempts + 1, attemptedAt, status, error, outcome: outcome.kind, retryInMs });
    let tally = tallies.get(event.subscriptionId);
    if (tally === undefined) {
      tally = { delivered: 0, retried: 0, failed: 0, lastSuccessAt: null, lastFailure: null };
      tallies.set(event.subscriptionId, tally);
    }
    if (outcome.kind === 'delivered') {
      tally.delivered += 1;
      if (tally.lastSuccessAt === null || compareTimes(attemptedAt, tally.lastSuccessAt) > 0) tally.lastSuccessAt = attemptedAt;
      continue;
    }
    if (outcome.kind === 'retry') tally.retried += 1;
    else tally.failed += 1;
    if (tally.lastFailure === null || isLaterAttempt(result, tally.lastFailure)) tally.lastFailure = result;
    if (outcome.kind === 'retry' && outcome.disable !== undefined) {
      const earliest = gone.get(event.subscriptionId);
      if (earliest === undefined || isLaterAttempt(earliest.result, result)) gone.set(event.subscriptionId, { result, reason: outcome.disable });
    } else if (outcome.kind === 'failed') {
      const deciding = spent.get(event.subscriptionId);
      if (deciding === undefined || isDecidingSpent(result, deciding.result)) spent.set(event.subscriptionId, { result, reason: outcome.disableReason });
    }
  }
  const disables = [...new Set([...gone.keys(), ...spent.keys()])].sort(compareIds).map((subscriptionId): SubscriptionDisable => {
    const byGone = gone.get(subscriptionId);
    if (byGone) return { subscriptionId, at: byGone.result.attemptedAt, reason: byGone.reason, unlessSuccessSince: null };
    const { result, reason } = spent.get(subscriptionId) as { result: WebhookAttemptResult; reason: string };
    return { subscriptionId, at: result.attemptedAt, reason, unlessSuccessSince: result.event.createdAt };
  });
  return {
    released,
    attempts,
    tallies: [...tallies]
      .sort(([a], [b]) => compareIds(a, b))
      .map(([subscriptionId, { delivered, retried, failed, lastSuccessAt, lastFailure }]) => ({
        subscriptionId,
        delivered,
        retried,
        failed,
        lastSuccessAt,
        lastFailureAt: lastFailure?.attemptedAt ?? null,
        lastError: lastFailure?.error ?? null,
      })),
    disables,
  };
}
