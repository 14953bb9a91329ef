import { plantJson } from '../json/plant-json.js';
import type { ActiveWebhookSubscription, ClaimedWebhookEvent } from '../storage/webhook-store.js';
import { webhookEventId } from '../storage/webhook-store.js';
import type { AttemptAnswer, WebhookSender } from './sender.js';
import { webhookSignature } from './signature.js';

/**
 * What the dispatcher lets a tracer see of its attempts: src/tracing/ implements it, src/services.ts hands it in
 * (DispatcherOptions.tracer), so the webhooks read no tracing state of their own.
 */
export interface DeliveryTracer {
  /**
   * A delivery attempt of an event created in the trace `traceparent` names: the traceparent its request sends, and
   * its end with the subscriber's answer; undefined when the event has no trace.
   */
  delivery(
    traceparent: string | undefined,
    target: { readonly url: string; readonly subscription: string; readonly attempt: number },
  ): { readonly traceparent: string; end(status: number | null, error: string | null): void } | undefined;
}

/**
 * One attempt at one claimed event, as Standard Webhooks has it sent: the webhook-id (the same at every attempt, so
 * a receiver can drop repeats), the plant as the body, the timestamp of the attempt and the signature over the three
 * under each of the subscription's secrets. What becomes of the answer is the dispatcher's to decide.
 */
export async function sendEvent(
  sender: WebhookSender,
  subscription: ActiveWebhookSubscription,
  event: ClaimedWebhookEvent,
  attemptedAt: Date,
  tracer?: DeliveryTracer,
): Promise<AttemptAnswer> {
  const id = webhookEventId(subscription.idPrefix, event.id);
  const body = plantJson(event.plant);
  const timestampSeconds = Math.floor(attemptedAt.getTime() / 1000);
  // Tracing (src/tracing/): each attempt is a client span in the trace of the create that wrote the event, and its
  // request carries that span as its traceparent, for the subscriber to continue.
  const span = tracer?.delivery(event.traceparent, { url: subscription.url, subscription: subscription.name, attempt: event.attempts + 1 });
  const signature = webhookSignature(subscription.secrets, id, timestampSeconds, body);
  const answer = await sender.send({ url: subscription.url, id, timestampSeconds, body, signature, ...(span ? { traceparent: span.traceparent } : {}) });
  span?.end(answer.status, answer.error);
  return answer;
}
