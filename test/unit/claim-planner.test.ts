/**
 * How many events the dispatcher claims ahead: each subscription's hold target adapts to how fast its queue goes,
 * and claims fill each up to its target within what the instance may hold in all; and how long a claim lasts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimLease, holdBounds, nextHoldTarget, planClaims, type HoldBounds, type SubscriptionHold } from '../../src/webhooks/claim-planner.js';

function hold(id: bigint, holdTarget: number, inFlight = 0, queued = 0, claimedFull = false): SubscriptionHold {
  return { subscription: { id }, inFlight, queue: { length: queued }, holdTarget, claimedFull };
}

const BOUNDS: HoldBounds = { minHold: 64, maxHeld: 4096 };

describe('the claim planner', () => {
  it('holds four times the in-flight bound per subscription at first, and at least 4,096 events in all', () => {
    assert.deepEqual(holdBounds({ maxInFlight: 64, maxInFlightPerSubscription: 16 }), { minHold: 64, maxHeld: 4096 });
    assert.deepEqual(holdBounds({ maxInFlight: 2000, maxInFlightPerSubscription: 1 }), { minHold: 4, maxHeld: 8000 });
  });

  const targets: ReadonlyArray<{ name: string; state: SubscriptionHold; target: number }> = [
    { name: 'doubles when the queue ran dry and the last claim came back full', state: hold(1n, 64, 16, 0, true), target: 128 },
    { name: 'doubles no further than the overall bound', state: hold(1n, 3000, 16, 0, true), target: 4096 },
    { name: 'stays when the queue ran dry but nothing more was due', state: hold(1n, 256, 0, 0, false), target: 256 },
    { name: 'stays while at most three quarters is still queued', state: hold(1n, 256, 16, 192, true), target: 256 },
    { name: 'halves when more than three quarters is still queued', state: hold(1n, 256, 0, 193), target: 128 },
    { name: 'halves, rounding down', state: hold(1n, 257, 0, 250), target: 128 },
    { name: 'halves no lower than where it starts', state: hold(1n, 100, 0, 90), target: 64 },
  ];
  for (const { name, state, target } of targets) {
    it(`hold target ${name}`, () => assert.equal(nextHoldTarget(state, BOUNDS), target));
  }

  const plans: ReadonlyArray<{ name: string; states: SubscriptionHold[]; inFlight: number; bounds?: HoldBounds; claims: Array<{ subscriptionId: bigint; limit: number }> }> = [
    { name: 'nothing without subscriptions', states: [], inFlight: 0, claims: [] },
    {
      name: 'each subscription up to its target, less what it holds',
      states: [hold(1n, 64), hold(2n, 128, 10, 20)],
      inFlight: 10,
      claims: [
        { subscriptionId: 1n, limit: 64 },
        { subscriptionId: 2n, limit: 98 },
      ],
    },
    { name: 'none for a subscription holding its target or more', states: [hold(1n, 64, 16, 48), hold(2n, 64, 0, 80)], inFlight: 16, claims: [] },
    {
      name: 'within the overall bound, in subscription order',
      states: [hold(1n, 80), hold(2n, 80), hold(3n, 80)],
      inFlight: 0,
      bounds: { minHold: 64, maxHeld: 100 },
      claims: [
        { subscriptionId: 1n, limit: 80 },
        { subscriptionId: 2n, limit: 20 },
      ],
    },
    {
      name: "less the instance's attempts in flight, those of subscriptions gone since included, and every queue",
      states: [hold(1n, 80, 5, 10), hold(2n, 80, 0, 30)],
      inFlight: 25,
      bounds: { minHold: 64, maxHeld: 100 },
      claims: [{ subscriptionId: 1n, limit: 35 }],
    },
  ];
  for (const { name, states, inFlight, bounds = BOUNDS, claims } of plans) {
    it(`claims ${name}`, () => assert.deepEqual(planClaims(states, inFlight, bounds), claims));
  }

  it('leases a claim for five attempts and a margin, and starts an attempt only while its time limit and the margin remain', () => {
    assert.deepEqual(claimLease({ timeoutMs: 10_000 }), { leaseMs: 55_000, startWithinMs: 40_000 });
    for (const timeoutMs of [1, 250, 600_000]) {
      const { leaseMs, startWithinMs } = claimLease({ timeoutMs });
      assert.equal(leaseMs - startWithinMs, timeoutMs + 5000, `timeout ${timeoutMs} ms`);
    }
  });
});
