/**
 * The settlement plan both stores apply: from a round's attempt results, the attempt log, the events, each
 * subscription's totals and latest outcomes, and the disables, the same whatever order the results come in.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClaimedWebhookEvent, WebhookAttemptOutcome, WebhookAttemptResult } from '../../src/storage/webhook-store.js';
import { planSettlement, type SettlementPlan } from '../../src/storage/webhook-settlement.js';

const GONE = 'the endpoint answered 410 Gone';
const T = Date.UTC(2026, 0, 1);

/** Event `id` of subscription `subscription`, created `createdAt` ms after T, attempted `attempts` times before. */
function event(id: bigint, subscription: bigint, createdAt = 0, attempts = 0): ClaimedWebhookEvent {
  return { id, subscriptionId: subscription, plant: { id, name: 'p', tag: null }, createdAt: new Date(T + createdAt), attempts, retryIndex: 0 };
}

function result(claimed: ClaimedWebhookEvent, at: number, outcome: WebhookAttemptOutcome, status: number | null = null, error: string | null = null): WebhookAttemptResult {
  return { event: claimed, attemptedAt: new Date(T + at), status, error, outcome };
}

const delivered = (claimed: ClaimedWebhookEvent, at: number) => result(claimed, at, { kind: 'delivered' }, 204);
const retried = (claimed: ClaimedWebhookEvent, at: number, error: string, retryInMs = 5000) => result(claimed, at, { kind: 'retry', retryInMs }, null, error);
const spent = (claimed: ClaimedWebhookEvent, at: number, reason: string) => result(claimed, at, { kind: 'failed', disableReason: reason }, 500, 'HTTP 500');
const gone = (claimed: ClaimedWebhookEvent, at: number) => result(claimed, at, { kind: 'retry', retryInMs: 5000, disable: GONE }, 410, 'HTTP 410');
const released = (claimed: ClaimedWebhookEvent) => result(claimed, 0, { kind: 'released' });

const at = (ms: number) => new Date(T + ms);

function tally(subscriptionId: bigint, counts: { delivered?: number; retried?: number; failed?: number }, success: number | null, failure: [number, string] | null = null) {
  return {
    subscriptionId,
    delivered: counts.delivered ?? 0,
    retried: counts.retried ?? 0,
    failed: counts.failed ?? 0,
    lastSuccessAt: success === null ? null : at(success),
    lastFailureAt: failure === null ? null : at(failure[0]),
    lastError: failure === null ? null : failure[1],
  };
}

/** Every permutation of `items`: a plan must not depend on the order of results. */
function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, index) => permutations([...items.slice(0, index), ...items.slice(index + 1)]).map((rest) => [item, ...rest]));
}

const a1 = event(11n, 1n);
const a2 = event(12n, 1n);
const a3 = event(13n, 1n, 5);
const b1 = event(21n, 2n);
const b2 = event(22n, 2n);

interface Case {
  readonly name: string;
  readonly results: readonly WebhookAttemptResult[];
  /** The parts of the plan that do not depend on the order of results. */
  readonly tallies?: SettlementPlan['tallies'];
  readonly disables?: SettlementPlan['disables'];
  readonly released?: readonly bigint[];
}

const cases: readonly Case[] = [
  { name: 'nothing', results: [], tallies: [], disables: [], released: [] },
  { name: 'released events count nothing', results: [released(a1), released(b1)], tallies: [], disables: [], released: [11n, 21n] },
  {
    name: 'deliveries: counted, the latest attempt is the last success',
    results: [delivered(a1, 30), delivered(a2, 10), delivered(b1, 20)],
    tallies: [tally(1n, { delivered: 2 }, 30), tally(2n, { delivered: 1 }, 20)],
    disables: [],
  },
  {
    name: 'failures: the latest attempt is the last failure, with its error',
    results: [retried(a1, 40, 'timed out'), retried(a2, 10, 'HTTP 503'), delivered(a3, 50)],
    tallies: [tally(1n, { delivered: 1, retried: 2 }, 50, [40, 'timed out'])],
    disables: [],
  },
  {
    name: 'failures at the same millisecond: the later event gives the error',
    results: [retried(a2, 10, 'of 12'), retried(a1, 10, 'of 11')],
    tallies: [tally(1n, { retried: 2 }, null, [10, 'of 12'])],
    disables: [],
  },
  {
    name: 'a spent schedule: marked failed, disabled unless a success came since the event was created',
    results: [spent(a1, 10, 'spent'), delivered(b1, 5)],
    tallies: [tally(1n, { failed: 1 }, null, [10, 'HTTP 500']), tally(2n, { delivered: 1 }, 5)],
    disables: [{ subscriptionId: 1n, at: at(10), reason: 'spent', unlessSuccessSince: at(0) }],
  },
  {
    name: 'of spent events, the one created last decides; of those created together, the later attempt',
    results: [spent(a3, 10, 'created last'), spent(a1, 30, 'created first'), spent(b1, 10, 'earlier'), spent(b2, 20, 'later')],
    tallies: [tally(1n, { failed: 2 }, null, [30, 'HTTP 500']), tally(2n, { failed: 2 }, null, [20, 'HTTP 500'])],
    disables: [
      { subscriptionId: 1n, at: at(10), reason: 'created last', unlessSuccessSince: at(5) },
      { subscriptionId: 2n, at: at(20), reason: 'later', unlessSuccessSince: at(0) },
    ],
  },
  {
    name: 'a 410 Gone disables at once, from the earliest 410, before a spent schedule',
    results: [spent(a1, 5, 'spent'), gone(a2, 20), gone(a3, 15), delivered(b1, 1), gone(b2, 7)],
    tallies: [tally(1n, { retried: 2, failed: 1 }, null, [20, 'HTTP 410']), tally(2n, { delivered: 1, retried: 1 }, 1, [7, 'HTTP 410'])],
    disables: [
      { subscriptionId: 1n, at: at(15), reason: GONE, unlessSuccessSince: null },
      { subscriptionId: 2n, at: at(7), reason: GONE, unlessSuccessSince: null },
    ],
  },
];

describe('the webhook settlement plan', () => {
  for (const { name, results, ...expected } of cases) {
    it(`${name}, in every order of the results`, () => {
      for (const order of permutations(results)) {
        const plan = planSettlement(order);
        if (expected.tallies) assert.deepEqual(plan.tallies, expected.tallies);
        if (expected.disables) assert.deepEqual(plan.disables, expected.disables);
        if (expected.released) assert.deepEqual([...plan.released].sort(), [...expected.released].sort());
        // One attempt per result not released, whatever the order.
        assert.equal(plan.attempts.length, order.filter((r) => r.outcome.kind !== 'released').length);
      }
    });
  }

  it('logs each attempt as the next of its event, in the order of the results, with the retry delay in whole milliseconds', () => {
    const again = event(31n, 3n, 0, 4);
    const plan = planSettlement([released(a1), retried(again, 7, 'refused', 1500.6), delivered(b1, 8), spent(a2, 9, 'spent')]);
    assert.deepEqual(plan.attempts, [
      { eventId: 31n, subscriptionId: 3n, attempt: 5, attemptedAt: at(7), status: null, error: 'refused', outcome: 'retry', retryInMs: 1501 },
      { eventId: 21n, subscriptionId: 2n, attempt: 1, attemptedAt: at(8), status: 204, error: null, outcome: 'delivered', retryInMs: 0 },
      { eventId: 12n, subscriptionId: 1n, attempt: 1, attemptedAt: at(9), status: 500, error: 'HTTP 500', outcome: 'failed', retryInMs: 0 },
    ]);
    assert.deepEqual(plan.released, [11n]);
    // Ascending subscription ids, whatever order they came in.
    assert.deepEqual(
      plan.tallies.map((t) => t.subscriptionId),
      [1n, 2n, 3n],
    );
  });
});
