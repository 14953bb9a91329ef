import type { ActiveWebhookSubscription, ClaimedWebhookEvent, WebhookClaim } from '../storage/webhook-store.js';
import { nextHoldTarget, planClaims, type HoldBounds } from './claim-planner.js';

/** An event claimed for a subscription and not yet attempted. */
export interface QueuedEvent {
  readonly event: ClaimedWebhookEvent;
  /** performance.now() when the claim was asked for: no later than the store started the event's lease. */
  readonly claimedAt: number;
}

/** One active subscription as the dispatcher holds it. */
export interface SubscriptionState {
  subscription: ActiveWebhookSubscription;
  /** Its attempts in flight: the dispatcher counts them up when it starts one and down when it ends. */
  inFlight: number;
  queue: QueuedEvent[];
  /** How many events to hold, in flight and queued (claim-planner.ts). */
  holdTarget: number;
  /** The last claim came back full: more may be due than was claimed. */
  claimedFull: boolean;
}

/**
 * The dispatcher's subscriptions as last read from the store, each with the events claimed for it and not yet
 * attempted, in the store's order. Whatever takes queued events away (a subscription gone or disabled, a stop, an
 * event claimed for a subscription no longer here) hands them back to the caller, which releases them: a claimed
 * event is attempted or released, never dropped.
 */
export class SubscriptionQueues {
  readonly #bounds: HoldBounds;
  #states = new Map<bigint, SubscriptionState>();
  /** Where the next take() starts its turn among the subscriptions. */
  #turn = 0;

  constructor(bounds: HoldBounds) {
    this.#bounds = bounds;
  }

  get size(): number {
    return this.#states.size;
  }

  /**
   * Takes the subscriptions active now: one still active keeps its queue and hold target and takes the record as now
   * read (a rotated secret, a new URL); a new one starts empty at the least hold. Returns the events queued for those
   * no longer active.
   */
  refresh(active: readonly ActiveWebhookSubscription[]): ClaimedWebhookEvent[] {
    const next = new Map<bigint, SubscriptionState>();
    for (const subscription of active) {
      const state = this.#states.get(subscription.id);
      next.set(
        subscription.id,
        state ? Object.assign(state, { subscription }) : { subscription, inFlight: 0, queue: [], holdTarget: this.#bounds.minHold, claimedFull: false },
      );
    }
    const gone: ClaimedWebhookEvent[] = [];
    for (const [id, state] of this.#states) {
      if (!next.has(id)) unqueue(state, gone);
    }
    this.#states = next;
    return gone;
  }

  /** Forgets the subscription of that name (disabled by a settlement); returns the events queued for it. */
  remove(name: string): ClaimedWebhookEvent[] {
    const gone: ClaimedWebhookEvent[] = [];
    for (const [id, state] of this.#states) {
      if (state.subscription.name !== name) continue;
      this.#states.delete(id);
      unqueue(state, gone);
    }
    return gone;
  }

  /** Empties every queue, keeping the subscriptions; returns the events. */
  drain(): ClaimedWebhookEvent[] {
    const gone: ClaimedWebhookEvent[] = [];
    for (const state of this.#states.values()) unqueue(state, gone);
    return gone;
  }

  /** Before a claim: each subscription's hold target follows how fast its queue went since the last one. */
  adaptHoldTargets(): void {
    for (const state of this.#states.values()) state.holdTarget = nextHoldTarget(state, this.#bounds);
  }

  /** What to claim: for each subscription, room up to its hold target, within the overall bound less `inFlight`. */
  claims(inFlight: number): WebhookClaim[] {
    return planClaims(this.#states.values(), inFlight, this.#bounds);
  }

  /**
   * Queues what `claims` brought back, as claimed at `claimedAt`, and notes which claims came back full. Returns the
   * events of subscriptions no longer here, and whether any claim came back full (more may be due than was claimed).
   */
  accept(claimed: readonly ClaimedWebhookEvent[], claims: readonly WebhookClaim[], claimedAt: number): { unwanted: ClaimedWebhookEvent[]; full: boolean } {
    const unwanted: ClaimedWebhookEvent[] = [];
    const claimedBy = new Map<bigint, number>();
    for (const event of claimed) {
      claimedBy.set(event.subscriptionId, (claimedBy.get(event.subscriptionId) ?? 0) + 1);
      const state = this.#states.get(event.subscriptionId);
      if (state) state.queue.push({ event, claimedAt });
      else unwanted.push(event);
    }
    let full = false;
    for (const claim of claims) {
      const state = this.#states.get(claim.subscriptionId);
      const claimFull = (claimedBy.get(claim.subscriptionId) ?? 0) >= claim.limit;
      if (state) state.claimedFull = claimFull;
      if (claimFull) full = true;
    }
    return { unwanted, full };
  }

  /**
   * The queued events to start now, each taken off its queue as it is yielded: the caller starts (or releases) each
   * before the next is asked for. The instance's in-flight budget is shared among the subscriptions in turn (the
   * first asked rotates from one call to the next): first each, one at a time, up to its share (the budget over the
   * subscriptions, within the per-subscription bound); then, for those with more waiting, beyond it up to the
   * per-subscription bound, one at a time, keeping one attempt free for each other subscription still below its
   * share (at most a quarter of the budget). A subscription whose attempts hang holds no more than its share while
   * others have events, and the others' next events start at once; alone, or beside idle ones, it may use nearly all.
   */
  *take(budget: InFlightBudget): Generator<{ readonly state: SubscriptionState; readonly queued: QueuedEvent }> {
    const states = [...this.#states.values()];
    if (states.length === 0) return;
    const share = Math.max(1, Math.min(budget.perSubscription, Math.floor(budget.total / states.length)));
    const first = this.#turn % states.length;
    this.#turn = (first + 1) % states.length;
    const order = [...states.slice(first), ...states.slice(0, first)];
    const maxReserve = Math.floor(budget.total / 4);
    for (const beyondShare of [false, true]) {
      for (let started = true; started; ) {
        started = false;
        const reserve = beyondShare ? Math.min(maxReserve, order.filter((state) => state.inFlight < share).length) : 0;
        for (const state of order) {
          if (!budget.open() || budget.inFlight() >= budget.total) return;
          if (state.queue.length === 0 || state.inFlight >= (beyondShare ? budget.perSubscription : share)) continue;
          // Beyond its share, a subscription leaves room for the others below theirs.
          if (beyondShare && budget.total - budget.inFlight() - 1 < reserve) return;
          started = true;
          yield { state, queued: state.queue.shift() as QueuedEvent };
        }
      }
    }
  }
}

/** What the dispatcher may have in flight, and how much it has: what take() shares among the subscriptions. */
export interface InFlightBudget {
  /** WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION. */
  readonly perSubscription: number;
  /** WEBHOOK_MAX_IN_FLIGHT. */
  readonly total: number;
  /** Attempts in flight now, over every subscription (those gone since included). */
  inFlight(): number;
  /** Whether attempts may start at all (not once the dispatcher stops). */
  open(): boolean;
}

/** Empties the state's queue into `into`. */
function unqueue(state: SubscriptionState, into: ClaimedWebhookEvent[]): void {
  for (const { event } of state.queue.splice(0)) into.push(event);
}
