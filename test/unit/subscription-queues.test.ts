/**
 * The dispatcher's subscriptions and the events claimed for each: kept across re-reads, and every queued event that
 * leaves a queue other than to be started is handed back for release, never dropped.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ActiveWebhookSubscription, ClaimedWebhookEvent } from '../../src/storage/webhook-store.js';
import type { HoldBounds } from '../../src/webhooks/claim-planner.js';
import { SubscriptionQueues } from '../../src/webhooks/subscription-queues.js';

const BOUNDS: HoldBounds = { minHold: 4, maxHeld: 100 };

function subscription(id: bigint, secret = 'whsec_a'): ActiveWebhookSubscription {
  return { id, name: `hook-${id}`, url: `https://example.com/${id}`, idPrefix: `p${id}`, secrets: [secret] };
}

function event(subscriptionId: bigint, id: bigint): ClaimedWebhookEvent {
  return { id, subscriptionId, plant: { id: 9007199254740993n, name: 'p', tag: null }, createdAt: new Date(0), attempts: 0, retryIndex: 0 };
}

/** Every event queued, with its subscription, in the order take() yields them; takes them all. */
function takeAll(queues: SubscriptionQueues): Array<[bigint, bigint, number]> {
  return [...queues.take(() => true)].map(({ state, queued }) => [state.subscription.id, queued.event.id, queued.claimedAt]);
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
    const taken = [...queues.take(() => true)];
    assert.deepEqual(taken.map(({ queued }) => queued.event.id), [10n]);
    assert.deepEqual(taken[0]?.state.subscription.secrets, ['whsec_rotated']);
  });

  it('queues what a claim brought back with its claim time, and hands back events of a subscription no longer here', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    const { unwanted } = queues.accept([event(1n, 10n), event(9n, 90n), event(2n, 20n), event(1n, 11n)], [], 7);
    assert.deepEqual(unwanted.map((gone) => gone.id), [90n]);
    assert.deepEqual(takeAll(queues), [
      [1n, 10n, 7],
      [1n, 11n, 7],
      [2n, 20n, 7],
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

  it('takes queued events only while the subscription has room, asking again after each one started', () => {
    const queues = new SubscriptionQueues(BOUNDS);
    queues.refresh([subscription(1n), subscription(2n)]);
    queues.accept([event(1n, 10n), event(1n, 11n), event(1n, 12n), event(2n, 20n)], [], 0);
    const started: bigint[] = [];
    for (const { state, queued } of queues.take((state) => state.inFlight < 2)) {
      state.inFlight += 1;
      started.push(queued.event.id);
    }
    assert.deepEqual(started, [10n, 11n, 20n]);
    // What found no room stays queued, and the next claim leaves room for it and for the attempts in flight.
    assert.deepEqual(queues.claims(0), [
      { subscriptionId: 1n, limit: 1 },
      { subscriptionId: 2n, limit: 3 },
    ]);
    assert.deepEqual(takeAll(queues), [[1n, 12n, 0]]);
  });
});
