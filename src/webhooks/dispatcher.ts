import type { WebhookConfig } from '../config/config.js';
import type { ClaimedWebhookEvent, WebhookAttemptOutcome, WebhookAttemptResult, WebhookClaim, WebhookOutbox } from '../storage/webhook-store.js';
import { systemResolver } from './address-policy.js';
import { claimLease, holdBounds, type ClaimLease } from './claim-planner.js';
import type { DispatcherOptions, WebhookLog } from './dispatcher-options.js';
import { OutboxPruner } from './outbox-pruner.js';
import { decideOutcome } from './retry-policy.js';
import { WebhookSender } from './sender.js';
import { sendEvent, type DeliveryTracer } from './send-event.js';
import { SoonestTimer } from './soonest-timer.js';
import { SubscriptionQueues, type InFlightBudget, type SubscriptionState } from './subscription-queues.js';

/** Counts of this instance's dispatcher since it started (waiting: over all replicas, as of the last look). */
export interface WebhookStatsSnapshot {
  /** Events waiting for an attempt, of active subscriptions, in the whole database; read every second or so. */
  readonly waiting: number;
  readonly inFlight: number;
  readonly delivered: number;
  /** Failed attempts that will be retried. */
  readonly retried: number;
  /** Events given up on after the whole schedule. */
  readonly failed: number;
  /** Subscriptions this instance disabled (410 Gone, or a schedule spent without a success). */
  readonly disabled: number;
}

/** What metrics (or anything else) may read of the dispatcher. */
export interface WebhookStats {
  snapshot(): WebhookStatsSnapshot;
}

const POLL_INTERVAL_MS = 1000;
/**
 * Each round trip (settling finished attempts, claiming more) is a write transaction, on SQLite on the event loop
 * shared with creates, so under load there is at most one this often; the first after a quiet spell runs at once.
 * Throughput is kept by claiming ahead and settling many attempts per round trip.
 */
const MIN_ROUND_TRIP_INTERVAL_MS = 20;
/** Counting waiting events walks the index of waiting events, so it is done this often, not at every poll. */
const COUNT_INTERVAL_MS = 10_000;
/** After a store failure, the next try waits this long. */
const STORE_RETRY_MS = 1000;

/**
 * Delivers the outbox: claims due events, sends each as a signed POST, and settles what became of it, retrying on the
 * schedule. One per server process; on PostgreSQL several replicas share the work through leased claims.
 *
 * The create path never waits for it: creates only write events (in their own transaction) and wake it. Everything
 * it sends is bounded: attempts in flight per subscription and in all, one time limit per attempt, events claimed
 * ahead, and store round trips (one transaction settles finished attempts and claims more).
 */
export class WebhookDispatcher implements WebhookStats {
  readonly #store: WebhookOutbox;
  readonly #config: WebhookConfig;
  readonly #log: WebhookLog;
  readonly #sender: WebhookSender;
  readonly #random: () => number;
  readonly #pollIntervalMs: number;
  readonly #stopGraceMs: number;
  /** How long a claim lasts, and how long after it an attempt may still start (claim-planner.ts). */
  readonly #lease: ClaimLease;
  /** The active subscriptions with the events claimed for each and not yet attempted. */
  readonly #subscriptions: SubscriptionQueues;
  #results: WebhookAttemptResult[] = [];
  #inFlight = 0;
  #attempts = new Set<Promise<void>>();
  /** Events may be due that have not been claimed: set by wake(), the poll, and a claim that came back full. */
  #mayBeDue = true;
  #ticking = false;
  #tickAgain = false;
  readonly #tickTimer = new SoonestTimer(() => void this.#tick());
  #lastRoundTripAt = -Infinity;
  #pollTimer: NodeJS.Timeout | undefined;
  #countedAt = -Infinity;
  /** Wakes the dispatcher when the soonest retry it scheduled is due, rather than at the next poll. */
  readonly #retryTimer = new SoonestTimer(() => this.wake());
  /** Deletes delivered events past the retention, soon after start and then every prune interval. */
  readonly #pruner: OutboxPruner;
  #stopped = false;
  readonly #tracer: DeliveryTracer | undefined;
  #stats = { waiting: 0, delivered: 0, retried: 0, failed: 0, disabled: 0 };
  readonly #budget: InFlightBudget;

  constructor(store: WebhookOutbox, options: DispatcherOptions) {
    this.#store = store;
    this.#config = options.config;
    this.#log = options.log;
    this.#random = options.random ?? Math.random;
    this.#pollIntervalMs = options.pollIntervalMs ?? POLL_INTERVAL_MS;
    this.#stopGraceMs = options.stopGraceMs;
    this.#tracer = options.tracer;
    this.#pruner = new OutboxPruner(store, options.config.retentionMs, options.log, options.pruneIntervalMs);
    this.#lease = claimLease(options.config);
    this.#subscriptions = new SubscriptionQueues(holdBounds(options.config));
    this.#budget = {
      perSubscription: options.config.maxInFlightPerSubscription,
      total: options.config.maxInFlight,
      inFlight: () => this.#inFlight,
      open: () => !this.#stopped,
    };
    this.#sender = new WebhookSender({
      timeoutMs: options.config.timeoutMs,
      allowPrivateNetworks: options.config.allowPrivateNetworks,
      resolve: options.resolve ?? systemResolver,
      connectionsPerOrigin: options.config.maxInFlightPerSubscription,
    });
  }

  /**
   * Starts delivering. `releaseLeases` is for a store only this process dispatches from (SQLite): claims a killed
   * predecessor held are void, so its events are sent again at once rather than after their lease.
   */
  async start(releaseLeases: boolean): Promise<void> {
    if (releaseLeases) await this.#store.releaseLeases();
    await this.#poll();
    this.#pruner.start();
  }

  /** Plants were created (their events committed): look for due events now rather than at the next poll. */
  wake(): void {
    if (this.#stopped || this.#subscriptions.size === 0) return;
    this.#mayBeDue = true;
    this.#scheduleTick(0);
  }

  snapshot(): WebhookStatsSnapshot {
    return { ...this.#stats, inFlight: this.#inFlight };
  }

  /** Deletes delivered events past the retention; also runs on its own every hour. */
  async prune(): Promise<number> {
    return this.#pruner.prune();
  }

  /**
   * Stops claiming, lets attempts in flight finish for up to stopGraceMs, cuts the rest short, releases every event
   * claimed and not attempted (the next start, or another replica, sends them), and records what happened.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#pollTimer);
    this.#pruner.stop();
    this.#tickTimer.cancel();
    this.#retryTimer.cancel();
    for (const event of this.#subscriptions.drain()) this.#release(event);
    if (this.#attempts.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.#stopGraceMs);
      });
      await Promise.race([Promise.all(this.#attempts), grace]);
      clearTimeout(timer);
      this.#sender.interrupt();
      await Promise.all(this.#attempts);
    }
    while (this.#ticking) await new Promise((resolve) => setTimeout(resolve, 5));
    if (this.#results.length > 0) {
      const results = this.#results.splice(0);
      await this.#store.settleAndClaim(results, [], this.#lease.leaseMs).then(
        ({ disabled }) => this.#logDisabled(disabled),
        (error: unknown) => this.#log.warn({ err: error, results: results.length }, 'webhook results could not be recorded at shutdown; those events will be sent again'),
      );
    }
    await this.#sender.close();
  }

  async #poll(): Promise<void> {
    if (this.#stopped) return;
    try {
      const active = await this.#store.active();
      // A subscription disabled or removed meanwhile: events claimed for it and not yet sent are released.
      for (const event of this.#subscriptions.refresh(active)) this.#release(event);
      if (this.#subscriptions.size === 0) this.#stats.waiting = 0;
      else if (performance.now() - this.#countedAt >= COUNT_INTERVAL_MS) {
        this.#countedAt = performance.now();
        this.#stats.waiting = await this.#store.countWaiting();
      }
      this.#mayBeDue = true;
      this.#scheduleTick(0);
    } catch (error) {
      this.#log.warn({ err: error }, 'webhook subscriptions could not be read; retrying');
    } finally {
      if (!this.#stopped) {
        this.#pollTimer = setTimeout(() => void this.#poll(), this.#pollIntervalMs);
        this.#pollTimer.unref();
      }
    }
  }

  #scheduleTick(delayMs: number): void {
    if (this.#stopped) return;
    this.#tickTimer.atMost(delayMs);
  }

  /** What to claim: for each subscription, room up to its hold target, within the overall bound. */
  #claims(): WebhookClaim[] {
    return this.#subscriptions.claims(this.#inFlight);
  }

  /** One store round trip: settle finished attempts, claim what is due. Never two at once. */
  async #tick(): Promise<void> {
    if (this.#stopped) return;
    if (this.#ticking) {
      this.#tickAgain = true;
      return;
    }
    if (this.#results.length === 0 && !(this.#mayBeDue && this.#claims().length > 0)) return;
    const wait = this.#lastRoundTripAt + MIN_ROUND_TRIP_INTERVAL_MS - performance.now();
    if (wait > 0) {
      this.#scheduleTick(wait);
      return;
    }
    if (this.#mayBeDue) this.#subscriptions.adaptHoldTargets();
    const claims = this.#mayBeDue ? this.#claims() : [];
    const results = this.#results.splice(0);
    this.#ticking = true;
    const claimedAt = performance.now();
    this.#lastRoundTripAt = claimedAt;
    if (claims.length > 0) this.#mayBeDue = false;
    try {
      const { claimed, disabled } = await this.#store.settleAndClaim(results, claims, this.#lease.leaseMs);
      this.#logDisabled(disabled);
      for (const { outcome } of results) if (outcome.kind === 'retry') this.#wakeIn(outcome.retryInMs);
      if (this.#stopped) {
        // stop() has emptied the queues already: nothing more is queued, whatever was claimed meanwhile is released.
        for (const event of claimed) this.#release(event);
      } else {
        const { unwanted, full } = this.#subscriptions.accept(claimed, claims, claimedAt);
        for (const event of unwanted) this.#release(event);
        // A claim that came back full may have left more due behind it.
        if (full) this.#mayBeDue = true;
      }
    } catch (error) {
      // Nothing was recorded or claimed: the results wait for the next round trip, and the claim is tried again.
      this.#results.unshift(...results);
      if (claims.length > 0) this.#mayBeDue = true;
      this.#log.warn({ err: error }, 'webhook outbox unavailable; retrying');
      this.#ticking = false;
      this.#scheduleTick(STORE_RETRY_MS);
      return;
    }
    this.#ticking = false;
    this.#pump();
    if (this.#tickAgain || this.#results.length > 0 || (this.#mayBeDue && this.#claims().length > 0)) {
      this.#tickAgain = false;
      this.#scheduleTick(0);
    }
  }

  #wakeIn(delayMs: number): void {
    if (this.#stopped) return;
    // A little after, so that the database finds it due by its own clock too.
    this.#retryTimer.atMost(delayMs + 5);
  }

  #logDisabled(disabled: ReadonlyArray<{ name: string; reason: string }>): void {
    for (const { name, reason } of disabled) {
      this.#stats.disabled += 1;
      this.#log.warn({ subscription: name, reason }, 'webhook subscription disabled');
      for (const event of this.#subscriptions.remove(name)) this.#release(event);
    }
  }

  /** Gives a claimed event back unattempted: the next claim (here or on another replica) finds it due. */
  #release(event: ClaimedWebhookEvent): void {
    this.#results.push({ event, attemptedAt: new Date(), status: null, error: null, outcome: { kind: 'released' } });
  }

  /**
   * Starts queued events while the in-flight budget, shared among the subscriptions in turn, has room for them
   * (SubscriptionQueues.take); releases those queued too long.
   */
  #pump(): void {
    const now = performance.now();
    let released = false;
    for (const { state, queued } of this.#subscriptions.take(this.#budget)) {
      if (now - queued.claimedAt <= this.#lease.startWithinMs) this.#attempt(state, queued.event);
      else {
        this.#release(queued.event);
        released = true;
      }
    }
    if (released) {
      this.#mayBeDue = true;
      this.#scheduleTick(0);
    }
  }

  #attempt(state: SubscriptionState, event: ClaimedWebhookEvent): void {
    state.inFlight += 1;
    this.#inFlight += 1;
    const attemptedAt = new Date();
    const attempt = sendEvent(this.#sender, state.subscription, event, attemptedAt, this.#tracer)
      .then((answer) => {
        const interrupted = this.#sender.interrupted && answer.status === null;
        const outcome: WebhookAttemptOutcome = interrupted ? { kind: 'released' } : decideOutcome(event, answer, this.#config.retrySchedule, this.#random);
        this.#count(outcome);
        this.#results.push({ event, attemptedAt, status: answer.status, error: answer.error, outcome });
      })
      .finally(() => {
        state.inFlight -= 1;
        this.#inFlight -= 1;
        this.#attempts.delete(attempt);
        if (this.#stopped) return;
        this.#pump();
        this.#scheduleTick(0);
      });
    this.#attempts.add(attempt);
  }

  #count(outcome: WebhookAttemptOutcome): void {
    if (outcome.kind === 'delivered') this.#stats.delivered += 1;
    else if (outcome.kind === 'retry') this.#stats.retried += 1;
    else if (outcome.kind === 'failed') this.#stats.failed += 1;
  }
}
