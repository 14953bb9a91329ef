import type { ClaimedWebhookEvent, WebhookAttemptOutcome } from '../storage/webhook-store.js';
import type { AttemptAnswer } from './sender.js';

/** Retry-After is honoured up to this, so a subscriber cannot park an event for ever. */
export const RETRY_AFTER_MAX_MS = 24 * 3_600_000;

/** The disable reason of a subscriber answering 410 Gone. */
export const GONE_REASON = 'the endpoint answered 410 Gone';

/**
 * What follows an attempt: done (any 2xx), a retry after the schedule's next delay (stretched by up to 20% of jitter,
 * Retry-After honoured up to a day), or failed once the schedule is spent, which disables the subscription if it has
 * not succeeded since the event was created (the store checks that). A 410 Gone disables the subscription at once
 * and keeps the event waiting, in case it is enabled again. `random` gives numbers in [0, 1) for the jitter.
 */
export function decideOutcome(
  event: ClaimedWebhookEvent,
  answer: AttemptAnswer,
  retrySchedule: readonly number[],
  random: () => number,
): WebhookAttemptOutcome {
  const { status } = answer;
  if (status !== null && status >= 200 && status <= 299) return { kind: 'delivered' };
  // A redelivery (retry index -1) has its one attempt and no schedule.
  const scheduled = event.retryIndex >= 0 ? retrySchedule[event.retryIndex] : undefined;
  const what = status === null ? (answer.error ?? 'no answer') : `HTTP ${status}`;
  if (status === 410) {
    // Gone: the subscriber says it will never want these again. The event stays waiting, in case it is enabled again.
    const delay = scheduled ?? retrySchedule.at(-1) ?? 0;
    return { kind: 'retry', retryInMs: delay, disable: GONE_REASON };
  }
  if (scheduled === undefined) {
    const reason = `every attempt failed for the whole retry schedule (${event.attempts + 1} attempts); the last: ${what}`;
    return { kind: 'failed', disableReason: reason };
  }
  const jittered = scheduled * (1 + 0.2 * random());
  const retryAfter = answer.retryAfterMs === undefined ? 0 : Math.min(answer.retryAfterMs, RETRY_AFTER_MAX_MS);
  return { kind: 'retry', retryInMs: Math.round(Math.max(jittered, retryAfter)) };
}
