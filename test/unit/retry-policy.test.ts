/**
 * The dispatcher's retry decision: what follows an attempt, from its answer and the event's place in the schedule.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClaimedWebhookEvent, WebhookAttemptOutcome } from '../../src/storage/webhook-store.js';
import { GONE_REASON, RETRY_AFTER_MAX_MS, decideOutcome } from '../../src/webhooks/retry-policy.js';
import type { AttemptAnswer } from '../../src/webhooks/sender.js';

const SCHEDULE = [1000, 5000, 30_000];

/** An event `attempts` attempts in, at `retryIndex` in the schedule (-1: a redelivery). */
function event(retryIndex: number, attempts = Math.max(retryIndex, 0)): ClaimedWebhookEvent {
  return { id: 1n, subscriptionId: 1n, plant: { id: 1n, name: 'p', tag: null }, createdAt: new Date(0), attempts, retryIndex };
}

const answered = (status: number, retryAfterMs?: number): AttemptAnswer => ({ status, error: null, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });
const unanswered = (error: string | null): AttemptAnswer => ({ status: null, error });
const spentReason = (attempts: number, last: string) => `every attempt failed for the whole retry schedule (${attempts} attempts); the last: ${last}`;

const cases: ReadonlyArray<{ name: string; event: ClaimedWebhookEvent; answer: AttemptAnswer; random?: number; schedule?: readonly number[]; outcome: WebhookAttemptOutcome }> = [
  { name: '200 is delivered', event: event(0), answer: answered(200), outcome: { kind: 'delivered' } },
  { name: '204 late in the schedule is delivered', event: event(2), answer: answered(204), outcome: { kind: 'delivered' } },
  { name: '299 is delivered', event: event(0), answer: answered(299), outcome: { kind: 'delivered' } },
  { name: 'a redirect is not followed: retried', event: event(0), answer: answered(302), outcome: { kind: 'retry', retryInMs: 1000 } },
  { name: '500 is retried after the first delay', event: event(0), answer: answered(500), outcome: { kind: 'retry', retryInMs: 1000 } },
  { name: 'no answer is retried after the next delay', event: event(1), answer: unanswered('timed out'), outcome: { kind: 'retry', retryInMs: 5000 } },
  { name: 'jitter stretches a delay by up to 20%', event: event(1), answer: answered(500), random: 0.5, outcome: { kind: 'retry', retryInMs: 5500 } },
  { name: 'a jittered delay is whole milliseconds', event: event(0), answer: answered(500), random: 0.5, schedule: [1001], outcome: { kind: 'retry', retryInMs: 1101 } },
  { name: 'Retry-After longer than the delay wins', event: event(0), answer: answered(503, 60_000), outcome: { kind: 'retry', retryInMs: 60_000 } },
  { name: 'Retry-After shorter than the delay does not shorten it', event: event(0), answer: answered(429, 10), random: 0.5, outcome: { kind: 'retry', retryInMs: 1100 } },
  { name: 'Retry-After is honoured up to a day', event: event(0), answer: answered(503, 3 * RETRY_AFTER_MAX_MS), outcome: { kind: 'retry', retryInMs: RETRY_AFTER_MAX_MS } },
  { name: 'a spent schedule fails, naming the status', event: event(3), answer: answered(500), outcome: { kind: 'failed', disableReason: spentReason(4, 'HTTP 500') } },
  { name: 'a spent schedule fails, naming the error', event: event(3), answer: unanswered('connection refused'), outcome: { kind: 'failed', disableReason: spentReason(4, 'connection refused') } },
  { name: 'a spent schedule with neither says so', event: event(3), answer: unanswered(null), outcome: { kind: 'failed', disableReason: spentReason(4, 'no answer') } },
  { name: "a redelivery's one attempt fails at once", event: event(-1, 7), answer: answered(500), outcome: { kind: 'failed', disableReason: spentReason(8, 'HTTP 500') } },
  { name: '410 disables, the event retried after the scheduled delay unjittered', event: event(1), answer: answered(410), random: 0.9, outcome: { kind: 'retry', retryInMs: 5000, disable: GONE_REASON } },
  { name: '410 past the schedule waits its last delay', event: event(3), answer: answered(410), outcome: { kind: 'retry', retryInMs: 30_000, disable: GONE_REASON } },
  { name: '410 on a redelivery waits the last delay', event: event(-1, 4), answer: answered(410), outcome: { kind: 'retry', retryInMs: 30_000, disable: GONE_REASON } },
  { name: '410 with no schedule is due again at once', event: event(0), answer: answered(410), schedule: [], outcome: { kind: 'retry', retryInMs: 0, disable: GONE_REASON } },
];

describe('the retry decision', () => {
  for (const { name, event: claimed, answer, random = 0, schedule = SCHEDULE, outcome } of cases) {
    it(name, () => assert.deepEqual(decideOutcome(claimed, answer, schedule, () => random), outcome));
  }

  it('stretches by at most 20% (rounded to whole milliseconds) for any random number in [0, 1)', () => {
    for (const random of [0, 0.25, 0.999_999]) {
      const outcome = decideOutcome(event(2), answered(503), SCHEDULE, () => random);
      assert.equal(outcome.kind, 'retry');
      if (outcome.kind === 'retry') assert.ok(outcome.retryInMs >= 30_000 && outcome.retryInMs <= 36_000, String(outcome.retryInMs));
    }
  });
});
