/**
 * ConnectionAdmission's choices, on sockets that are only event emitters: who is served, who waits, whom eviction
 * closes and whom a full queue refuses. Idleness is measured on performance.now, so the eviction test waits out
 * EVICTABLE_AFTER_MS on the real clock; nothing is asserted about how long anything took.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { clientAddress, ConnectionAdmission, EVICTABLE_AFTER_MS, trustedProxies, type AdmissionLimits, type Refusal } from '../../src/http/connection-admission.js';

class FakeSocket extends EventEmitter {
  destroyed = false;
  ended: string | undefined;
  constructor(readonly remoteAddress: string) {
    super();
  }
  destroy(): this {
    if (!this.destroyed) {
      this.destroyed = true;
      this.emit('close');
    }
    return this;
  }
  end(answer: string): this {
    this.ended = answer;
    return this;
  }
  resume(): this {
    return this;
  }
}

function admission(limits: Partial<AdmissionLimits>, exempt: (address: string) => boolean = () => false) {
  const refused: Array<[string, Refusal]> = [];
  const evicted: string[] = [];
  const subject = new ConnectionAdmission(
    { connections: 10, perAddress: 10, queued: 10, queueTimeoutMs: 60_000, ...limits },
    exempt,
    { refused: (address, why) => refused.push([address, why]), evicted: (address) => evicted.push(address) },
    (why) => `503 ${why}`,
  );
  const served = new Set<FakeSocket>();
  const connect = (address: string) => {
    const socket = new FakeSocket(address);
    subject.accept(socket as unknown as Socket, () => served.add(socket));
    return socket;
  };
  return { subject, refused, evicted, served, connect };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('ConnectionAdmission', () => {
  it('serves an address up to its share; more wait, unread, and are served in order as its connections close', () => {
    const { subject, served, connect } = admission({ perAddress: 2 });
    const [a, b, c, d] = ['10.0.0.1', '10.0.0.1', '10.0.0.1', '10.0.0.1'].map(connect) as FakeSocket[];
    assert.deepEqual([served.has(a as FakeSocket), served.has(b as FakeSocket), served.has(c as FakeSocket), served.has(d as FakeSocket)], [true, true, false, false]);
    assert.equal(subject.waiting, 2);
    const other = connect('10.0.0.2');
    assert.ok(served.has(other), 'another address has its own share');
    a?.destroy();
    assert.ok(served.has(c as FakeSocket) && !served.has(d as FakeSocket), 'the oldest waiting is served first');
    b?.destroy();
    assert.ok(served.has(d as FakeSocket));
    assert.equal(subject.waiting, 0);
  });

  it('a trusted proxy has no address share, only the instance’s', () => {
    const { served, connect } = admission({ perAddress: 1, connections: 5 }, (address) => address === '10.0.0.9');
    const proxied = Array.from({ length: 5 }, () => connect('10.0.0.9'));
    assert.equal(proxied.filter((socket) => served.has(socket)).length, 5);
    assert.equal(served.has(connect('10.0.0.9')), false, 'the instance’s limit still holds');
  });

  it('a full queue refuses the newest waiting connection of the address with the most waiting, or the newcomer if that is its own', () => {
    const { refused, served, connect } = admission({ perAddress: 1, connections: 2, queued: 3 });
    connect('10.0.0.1');
    connect('10.0.0.2');
    const waitingOfFirst = [connect('10.0.0.1'), connect('10.0.0.1'), connect('10.0.0.1')];
    const newcomer = connect('10.0.0.3');
    assert.equal(served.has(newcomer), false);
    assert.deepEqual(refused, [['10.0.0.1', 'queue full']]);
    assert.equal(waitingOfFirst[2]?.ended, '503 queue full', 'the newest of the longest queue is answered 503');
    connect('10.0.0.1');
    assert.deepEqual(refused.at(-1), ['10.0.0.1', 'queue full'], 'its own queue is the longest: the newcomer is refused');
  });

  it('when the instance is full, an idle connection of the address served on the most is closed for one waiting', async () => {
    const { evicted, served, connect } = admission({ connections: 3 });
    const heavy = [connect('10.0.0.1'), connect('10.0.0.1')];
    const light = connect('10.0.0.2');
    const waiting = connect('10.0.0.3');
    assert.equal(served.has(waiting), false, 'just-connected connections are not yet evictable');
    // The waiting connection's sweep finds the others idle long enough (it runs every 250 ms).
    await sleep(EVICTABLE_AFTER_MS + 600);
    assert.ok(served.has(waiting), 'served by closing an idle connection');
    assert.deepEqual(evicted, ['10.0.0.1']);
    assert.equal(heavy.filter((socket) => socket.destroyed).length, 1);
    assert.equal(light.destroyed, false);
  });

  it('counts IPv4 clients of a dual-stack listener under their IPv4 address, and reads TRUST_PROXY’s forms', () => {
    assert.equal(clientAddress({ remoteAddress: '::ffff:10.1.2.3' } as Socket), '10.1.2.3');
    assert.equal(clientAddress({ remoteAddress: '::1' } as Socket), '::1');
    const trusted = trustedProxies(['loopback', '10.0.0.0/8', 'fd00::7']);
    assert.deepEqual(['127.0.0.5', '::1', '10.200.0.1', 'fd00::7', '11.0.0.1', 'fd00::8'].map(trusted), [true, true, true, true, false, false]);
    assert.equal(trustedProxies([])('127.0.0.1'), false);
  });
});
