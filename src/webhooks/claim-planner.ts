import type { WebhookClaim } from '../storage/webhook-store.js';

/**
 * How many events the dispatcher claims ahead, per subscription and in all. Events held per subscription (in flight
 * and queued) start at PREFETCH times its in-flight bound. A fixed amount would cap a subscription at that many events
 * per round trip (64 per 20 ms: 3,200 a second by default), below what one subscriber on a fast network takes, so the
 * amount adapts (nextHoldTarget) up to MAX_HELD_EVENTS.
 */
const PREFETCH = 4;
/** Events held in memory (in flight and queued), over all subscriptions, at most; more if the in-flight bounds ask. */
const MAX_HELD_EVENTS = 4096;

/** An attempt starts only while its claim has at least its time limit and this much left to run. */
const LEASE_MARGIN_MS = 5000;

/** How long the dispatcher's claims last. */
export interface ClaimLease {
  /**
   * How long a claim lasts. An event queued longer than its lease allows (the attempt's time limit plus a margin must
   * remain) is released instead of attempted, so a live replica never sends an event another may have claimed.
   */
  readonly leaseMs: number;
  /** An attempt may start this long after its claim at most. */
  readonly startWithinMs: number;
}

export function claimLease(config: { readonly timeoutMs: number }): ClaimLease {
  const leaseMs = (PREFETCH + 1) * config.timeoutMs + LEASE_MARGIN_MS;
  return { leaseMs, startWithinMs: leaseMs - config.timeoutMs - LEASE_MARGIN_MS };
}

export interface HoldBounds {
  /** The least a subscription's hold target falls to, and where it starts. */
  readonly minHold: number;
  /** Events held in all, at most; also the most one subscription's hold target grows to. */
  readonly maxHeld: number;
}

export function holdBounds(config: { readonly maxInFlight: number; readonly maxInFlightPerSubscription: number }): HoldBounds {
  return {
    minHold: PREFETCH * config.maxInFlightPerSubscription,
    maxHeld: Math.max(MAX_HELD_EVENTS, PREFETCH * config.maxInFlight),
  };
}

/** What the planner reads of one subscription's state in the dispatcher. */
export interface SubscriptionHold {
  readonly subscription: { readonly id: bigint };
  readonly inFlight: number;
  readonly queue: { readonly length: number };
  /** How many events to hold, in flight and queued. */
  readonly holdTarget: number;
  /** The last claim came back full: more may be due than was claimed. */
  readonly claimedFull: boolean;
}

/**
 * A subscription's hold target before a claim, after how fast its queue went since the last one: doubled when the
 * queue ran dry while more was due (deliveries outpace claims), halved when most of it is still queued.
 */
export function nextHoldTarget(state: SubscriptionHold, bounds: HoldBounds): number {
  if (state.queue.length === 0 && state.claimedFull) return Math.min(bounds.maxHeld, state.holdTarget * 2);
  if (state.queue.length > (state.holdTarget * 3) / 4) return Math.max(bounds.minHold, Math.floor(state.holdTarget / 2));
  return state.holdTarget;
}

/**
 * What to claim: for each subscription in turn, room up to its hold target, within what the instance may hold in all
 * (`inFlight`: its attempts in flight, those of subscriptions gone since included).
 */
export function planClaims(subscriptions: Iterable<SubscriptionHold>, inFlight: number, bounds: HoldBounds): WebhookClaim[] {
  const states = [...subscriptions];
  let room = bounds.maxHeld - inFlight;
  for (const state of states) room -= state.queue.length;
  const claims: WebhookClaim[] = [];
  for (const state of states) {
    const limit = Math.min(room, state.holdTarget - state.inFlight - state.queue.length);
    if (limit <= 0) continue;
    claims.push({ subscriptionId: state.subscription.id, limit });
    room -= limit;
  }
  return claims;
}
