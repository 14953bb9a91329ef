/**
 * The dispatcher's subscriptions and the events claimed for each: kept across re-reads, and every queued event that
 * leaves a queue other than to be started is handed back for release, never dropped.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ActiveWebhookSubscription, ClaimedWebhookEvent } from '../../src/storage/webhook-store.js';
import type { HoldBounds } from '../../src/webhooks/claim-planner.js';
import { SubscriptionQueues, type InFlightBudget, type SubscriptionState } from '../../src/webhooks/subscription-queues.js';

const BOUNDS: HoldBounds = { minHold: 4, maxHeld: 100 };

function subscription(id: bigint, secret = 'whsec_a'): ActiveWebhookSubscription {
  return { id, name: `hook-${id}`, url: `https://example.com/${id}`, idPrefix: `p${id}`, secrets: [secret] };
}

function event(subscriptionId: bigint, id: bigint): ClaimedWebhookEvent {
  return { id, subscriptionId, plant: { id: 9007199254740993n, name: 'p', tag: null }, createdAt: new Date(0), attempts: 0, retryIndex: 0 };
}

/** No bound at all: take() yields every queued event. */
const UNBOUNDED: InFlightBudget = { perSubscription: Infinity, total: Infinity, inFlight: () => 0, open: () => true };

/** A budget whose attempts in flight the test counts: each event taken is started (and counted on its subscription). */
function counted(perSubscription: number, total: number, inFlight = 0) {
  const budget = { perSubscription, total, inFlight: () => budget.count, open: () => true, count: inFlight };
  const seen = new Map<bigint, SubscriptionState>();
  const start = (queues: SubscriptionQueues): bigint[] => {
    const started: bigint[] = [];
    for (const { state, queued } of queues.take(budget)) {
      seen.set(state.subscription.id, state);
      state.inFlight += 1;
      budget.count += 1;
      started.push(queued.event.subscriptionId);
    }
    return started;
  };
  return { budget, start, seen };
}

const events = (subscriptionId: bigint, count: number, from = 0n) => Array.from({ length: count }, (_, index) => event(subscriptionId, from + BigInt(index)));
const tally = (ids: readonly bigint[]) => Object.fromEntries([...new Set(ids)].map((id) => [String(id), ids.filter((other) => other === id).length]));

/** Every event queued, with its subscription, in the order take() yields them; takes them all. */
function takeAll(queues: SubscriptionQueues): Array<[bigint, bigint, number]> {
  return [...queues.take(UNBOUNDED)].map(({ state, queued }) => [state.subscription.id, queued.event.id, queued.claimedAt]);
}

describe('the dispatcher\'s subscription queues', () => {
  it('starts a new subscription empty at the least hold, and claims for it up to that', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    assert.deepEqual(queues.refresh([subscription(1n), subscription(2n)]), []);
    assert.equal(queues.size, 2);
    assert.deepEqual(queues.claims(0), [
      { subscriptionId: 1n, limit: 4 },
      { subscriptionId: 2n, limit: 4 },
    ]);
  });

  it('keeps the queue of a subscription still active, with the record as read again, and hands back the events of one gone', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    queues.accept([event(1n, 10n), event(2n, 20n), event(2n, 21n)], [], 5);
    assert.deepEqual(queues.refresh([subscription(1n, 'whsec_rotated'), subscription(3n)]).map((gone) => gone.id), [20n, 21n]);
    assert.equal(queues.size, 2);
    const taken = [...queues.take(UNBOUNDED)];
    assert.deepEqual(taken.map(({ queued }) => queued.event.id), [10n]);
    assert.deepEqual(taken[0]?.state.subscription.secrets, ['whsec_rotated']);
  });

  it('queues what a claim brought back with its claim time, and hands back events of a subscription no longer here', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    const { unwanted } = queues.accept([event(1n, 10n), event(9n, 90n), event(2n, 20n), event(1n, 11n)], [], 7);
    assert.deepEqual(unwanted.map((gone) => gone.id), [90n]);
    // In turn: one of each subscription's, then the next.
    assert.deepEqual(takeAll(queues), [
      [1n, 10n, 7],
      [2n, 20n, 7],
      [1n, 11n, 7],
    ]);
  });

  it('says a claim came back full when it brought back its limit, and then grows that subscription\'s hold at the next claim', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    const claims = [
      { subscriptionId: 1n, limit: 2 },
      { subscriptionId: 2n, limit: 2 },
    ];
    assert.equal(queues.accept([event(1n, 10n), event(2n, 20n)], claims, 0).full, false);
    assert.equal(queues.accept([event(1n, 11n), event(1n, 12n), event(2n, 21n)], claims, 0).full, true);
    takeAll(queues);
    queues.adaptHoldTargets();
    // Subscription 1's last claim came back full and its queue ran dry: its hold doubles; subscription 2's stays.
    assert.deepEqual(queues.claims(0), [
      { subscriptionId: 1n, limit: 8 },
      { subscriptionId: 2n, limit: 4 },
    ]);
  });

  it('forgets a subscription disabled by name and hands back its events; another name changes nothing', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    queues.accept([event(1n, 10n), event(2n, 20n)], [], 0);
    assert.deepEqual(queues.remove('hook-9'), []);
    assert.deepEqual(queues.remove('hook-2').map((gone) => gone.id), [20n]);
    assert.equal(queues.size, 1);
    assert.deepEqual(takeAll(queues), [[1n, 10n, 0]]);
  });

  it('empties every queue at a stop, keeping the subscriptions', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    queues.accept([event(1n, 10n), event(2n, 20n), event(1n, 11n)], [], 0);
    assert.deepEqual(queues.drain().map((gone) => gone.id), [10n, 11n, 20n]);
    assert.equal(queues.size, 2);
    assert.deepEqual(takeAll(queues), []);
  });

  it('takes queued events only while the subscription has room, in turn, asking again after each one started', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    queues.accept([event(1n, 10n), event(1n, 11n), event(1n, 12n), event(2n, 20n)], [], 0);
    const { start } = counted(2, 100);
    assert.deepEqual(start(queues), [1n, 2n, 1n]);
    // What found no room stays queued, and the next claim leaves room for it and for the attempts in flight.
    assert.deepEqual(queues.claims(0), [
      { subscriptionId: 1n, limit: 1 },
      { subscriptionId: 2n, limit: 3 },
    ]);
    assert.deepEqual(takeAll(queues), [[1n, 12n, 0]]);
  });

  it("shares the budget: subscriptions whose attempts hang hold their share, and another subscription's events still start", () => {
    const queues = new SubscriptionQueues({ minHold: 4, maxHeld: 10_000 });
    queues.refresh([1n, 2n, 3n, 4n, 5n].map((id) => subscription(id)));
    // Four hanging subscriptions with plenty waiting: beyond their share of 12 they leave one attempt for the fifth.
    queues.accept([1n, 2n, 3n, 4n].flatMap((id) => events(id, 40, id * 1000n)), [], 0);
    const { budget, start, seen } = counted(16, 64);
    const first = tally(start(queues));
    assert.equal(budget.count, 63);
    assert.ok(Object.values(first).every((count) => count >= 12 && count <= 16), JSON.stringify(first));
    // The fifth's event starts at once, with every other attempt still hanging.
    queues.accept(events(5n, 20, 5000n), [], 0);
    assert.deepEqual(start(queues), [5n]);
    // As hanging attempts end (time out), the slots go first to those below their share, the fifth up to its 12.
    const hanging = [...seen.values()].filter((state) => state.subscription.id !== 5n);
    for (const state of hanging) {
      state.inFlight -= 3;
      budget.count -= 3;
    }
    assert.equal(tally(start(queues))['5'], 11);
    assert.equal(seen.get(5n)?.inFlight, 12);
    // The last slot, with no one below its share left, goes to a hanging one: the budget is never left idle.
    assert.equal(budget.count, 64);
  });

  it('is work-conserving: a subscription alone, or beside idle ones, uses the budget up to its own bound', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n)]);
    queues.accept(events(1n, 100), [], 0);
    assert.equal(counted(64, 64).start(queues).length, 64);
    const beside = new SubscriptionQueues(BOUNDS);
    beside.refresh([1n, 2n, 3n, 4n, 5n].map((id) => subscription(id)));
    beside.accept(events(1n, 100), [], 0);
    // Four idle subscriptions below their share keep one attempt each free.
    assert.equal(counted(64, 64).start(beside).length, 60);
  });
});
