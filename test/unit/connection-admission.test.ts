/**
 * ConnectionAdmission's choices, on sockets, requests and responses that are only event emitters: who is served, who
 * waits, whose idle connection makes room, who yields after an answer, whom a full queue refuses, which connection the
 * request bounds close, and in what turn requests start when handlers are full. Nothing is timed.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { describe, it } from 'node:test';
import { clientAddress, trustedProxies } from '../../src/http/client-address.js';
import { ConnectionAdmission, type AdmissionLimits } from '../../src/http/connection-admission.js';
import type { ConnectionOverrun } from '../../src/http/connection-bounds.js';
import type { Refusal } from '../../src/http/connection-refusal.js';

class FakeSocket extends EventEmitter {
  destroyed = false;
  writableLength = 0;
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
  end(answer = ''): this {
    this.ended = answer;
    return this;
  }
  resume(): this {
    return this;
  }
}

class FakeResponse extends EventEmitter {
  readonly headers: Record<string, string> = {};
  constructor(readonly req: IncomingMessage) {
    super();
  }
  setHeader(name: string, value: string): this {
    this.headers[name] = value;
    return this;
  }
  destroy(): void {
    this.emit('close');
  }
  /** The answer is done: Node emits 'close' on the response. */
  answer(): void {
    this.emit('close');
  }
}

const PER_CONNECTION = { handledAtOnce: 2, unanswered: 100, bufferedBytes: 1024 * 1024, stalledMs: 60_000 };

function setUp(limits: Partial<AdmissionLimits>, exempt: (address: string) => boolean = () => false) {
  const refused: Array<[string, Refusal]> = [];
  const evicted: string[] = [];
  const overran: ConnectionOverrun[] = [];
  const handled: FakeResponse[] = [];
  const subject = new ConnectionAdmission(
    { connections: 10, queued: 10, queueTimeoutMs: 60_000, pending: 1000, inFlight: 1000, pipelining: 1000, ...limits },
    PER_CONNECTION,
    (_request, response) => handled.push(response as unknown as FakeResponse),
    exempt,
    { refused: (address, why) => refused.push([address, why]), evicted: (address) => evicted.push(address), overran: (_socket, why) => overran.push(why) },
    (why) => `503 ${why}`,
  );
  const served = new Set<FakeSocket>();
  const connect = (address: string) => {
    const socket = new FakeSocket(address);
    subject.accept(socket as unknown as Socket, () => served.add(socket));
    return socket;
  };
  /** Sends `count` requests on `socket` as Node's parser hands them over, in one go; their responses. */
  const send = (socket: FakeSocket, count = 1) => {
    const responses: FakeResponse[] = [];
    for (let index = 0; index < count && !socket.destroyed; index += 1) {
      const request = { socket, destroy: () => undefined } as unknown as IncomingMessage;
      const response = new FakeResponse(request);
      responses.push(response);
      subject.handle(request, response as unknown as ServerResponse);
    }
    return responses;
  };
  /** A request sent on `socket` and answered: the connection is an idle keep-alive one. */
  const use = (socket: FakeSocket) => send(socket)[0]?.answer();
  return { subject, refused, evicted, overran, handled, served, connect, send, use };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
/** Longer than the grace a connection idle after an answer is left to its client before it may be closed. */
const pastReuseGrace = () => new Promise((resolve) => setTimeout(resolve, 50));

describe('ConnectionAdmission: connections', () => {
  it('serves every connection at once while the instance has room, however many one address opens', () => {
    const { subject, served, connect } = setUp({ connections: 5 });
    const sockets = Array.from({ length: 5 }, () => connect('10.0.0.1'));
    assert.equal(sockets.filter((socket) => served.has(socket)).length, 5);
    assert.equal(subject.waiting, 0);
  });

  it('when full, an idle connection of the newcomer’s own address makes room for it at once', async () => {
    const { evicted, served, connect, send, use } = setUp({ connections: 3 });
    const [busy, idle] = [connect('10.0.0.1'), connect('10.0.0.1')] as [FakeSocket, FakeSocket];
    send(busy);
    use(idle);
    send(connect('10.0.0.2'));
    await pastReuseGrace();
    const other = connect('10.0.0.2');
    assert.equal(served.has(other), false, '10.0.0.1 holds no more than 10.0.0.2 would with one more: nothing is taken from it');
    const newcomer = connect('10.0.0.1');
    assert.ok(served.has(newcomer));
    assert.deepEqual(evicted, ['10.0.0.1']);
    assert.equal(idle.ended, '', 'the idle one is ended, not reset');
    assert.equal(busy.ended, undefined, 'the busy one is left serving');
  });

  it('when full, an idle connection of the address holding the most makes room for another address, not one of a light address', async () => {
    const { evicted, served, connect, send, use } = setUp({ connections: 4 });
    const heavy = [connect('10.0.0.1'), connect('10.0.0.1'), connect('10.0.0.1')];
    const light = connect('10.0.0.2');
    send(heavy[0] as FakeSocket);
    use(heavy[1] as FakeSocket);
    use(heavy[2] as FakeSocket);
    use(light);
    await pastReuseGrace();
    const newcomer = connect('10.0.0.3');
    assert.ok(served.has(newcomer));
    assert.deepEqual(evicted, ['10.0.0.1']);
    assert.equal(heavy[1]?.ended, '', 'the heavy address’s longest idle is ended');
    assert.equal(light.ended, undefined);
  });

  it('when full of busy connections, one waits; a busy connection of the address holding more answers Connection: close, and the waiting one is served in its slot', () => {
    const { subject, served, connect, send } = setUp({ connections: 2 });
    const heavy = [connect('10.0.0.1'), connect('10.0.0.1')] as [FakeSocket, FakeSocket];
    const [first] = send(heavy[0]);
    const [second] = send(heavy[1]);
    const waiting = connect('10.0.0.2');
    assert.equal(served.has(waiting), false);
    assert.equal(subject.waiting, 1);
    assert.deepEqual([first?.headers.connection, second?.headers.connection], ['close', undefined], 'one connection is told to close for the one waiting');
    first?.answer();
    // Node closes a connection after an answer saying Connection: close.
    heavy[0].destroy();
    assert.ok(served.has(waiting), 'served in the slot given up');
    // Another of 10.0.0.1 waits: its own address's busy connection closes for it, a lighter address's does not.
    const third = connect('10.0.0.1');
    assert.equal(served.has(third), false);
    const [light] = send(waiting);
    assert.equal(light?.headers.connection, undefined, 'the lighter address keeps its connection');
    assert.equal(second?.headers.connection, 'close', 'the busy connection of the address with one waiting');
  });

  it('a connection served from the queue counts under its address, so its idle slot makes room for its own address', async () => {
    const { evicted, served, connect, send, use } = setUp({ connections: 2 });
    const heavy = [connect('10.0.0.1'), connect('10.0.0.1')] as [FakeSocket, FakeSocket];
    const [first] = send(heavy[0]);
    send(heavy[1]);
    const waited = connect('10.0.0.2');
    first?.answer();
    heavy[0].destroy();
    assert.ok(served.has(waited), 'served from the queue, its address having nothing else');
    use(waited);
    await pastReuseGrace();
    const newcomer = connect('10.0.0.2');
    assert.ok(served.has(newcomer), 'the idle connection that waited makes room for its own address');
    assert.deepEqual(evicted, ['10.0.0.2']);
  });

  it('a full queue refuses the newest waiting connection of the address with the most waiting, or the newcomer if that is its own', () => {
    const { refused, served, connect, send } = setUp({ connections: 2, queued: 3 });
    send(connect('10.0.0.1'));
    send(connect('10.0.0.2'));
    const waitingOfFirst = [connect('10.0.0.1'), connect('10.0.0.1'), connect('10.0.0.1')];
    const newcomer = connect('10.0.0.3');
    assert.equal(served.has(newcomer), false);
    assert.deepEqual(refused, [['10.0.0.1', 'queue full']]);
    assert.equal(waitingOfFirst[2]?.ended, '503 queue full', 'the newest of the longest queue is answered 503');
    connect('10.0.0.1');
    assert.deepEqual(refused.at(-1), ['10.0.0.1', 'queue full'], 'its own queue is the longest: the newcomer is refused');
  });

  it('a connection that has sent nothing is not taken before a sweep has seen it: the event loop has not read it yet', () => {
    const { served, connect } = setUp({ connections: 3 });
    Array.from({ length: 3 }, () => connect('10.0.0.1'));
    assert.equal(served.has(connect('10.0.0.2')), false);
  });

  it('a connection that has sent nothing, once swept twice, is taken for another address, never for its own', async () => {
    const { subject, served, connect } = setUp({ connections: 2 });
    const silent = [connect('10.0.0.1'), connect('10.0.0.1')];
    // The sweeper runs while connections are served; two of its rounds see them.
    await new Promise((resolve) => setTimeout(resolve, 800));
    const own = connect('10.0.0.1');
    assert.equal(served.has(own), false, 'its own address would only churn its silent connections');
    const other = connect('10.0.0.2');
    assert.ok(served.has(other), 'another address is served in the place of one of them');
    assert.equal(silent.filter((socket) => socket.ended !== undefined).length, 1);
    other.destroy();
    own.destroy();
    for (const socket of silent) socket.destroy();
    subject.stop();
  });

  it('a trusted proxy’s idle connections are not taken for other addresses', async () => {
    const { served, connect, use } = setUp({ connections: 3 }, (address) => address === '10.0.0.9');
    Array.from({ length: 3 }, () => use(connect('10.0.0.9')));
    await pastReuseGrace();
    assert.equal(served.has(connect('10.0.0.1')), false);
  });

  it('counts IPv4 clients of a dual-stack listener under their IPv4 address, and reads TRUST_PROXY’s forms', () => {
    assert.equal(clientAddress({ remoteAddress: '::ffff:10.1.2.3' } as Socket), '10.1.2.3');
    assert.equal(clientAddress({ remoteAddress: '::1' } as Socket), '::1');
    const trusted = trustedProxies(['loopback', '10.0.0.0/8', 'fd00::7']);
    assert.deepEqual(['127.0.0.5', '::1', '10.200.0.1', 'fd00::7', '11.0.0.1', 'fd00::8'].map(trusted), [true, true, true, true, false, false]);
    assert.equal(trustedProxies([])('127.0.0.1'), false);
  });
});

describe('ConnectionAdmission: requests', () => {
  it('a connection’s only request starts from the request event; pipelined ones from the check phase, handledAtOnce at a time', async () => {
    const { handled, connect, send } = setUp({});
    const socket = connect('10.0.0.1');
    const responses = send(socket, 4);
    assert.deepEqual(handled, responses.slice(0, 1));
    await turn();
    assert.deepEqual(handled, responses.slice(0, 2));
    responses[0]?.answer();
    await turn();
    assert.deepEqual(handled, responses.slice(0, 3));
  });

  it('when handlers are full, requests start one address at a time in turn, not in the order they came', async () => {
    const { subject, handled, connect, send } = setUp({ inFlight: 2 });
    const heavy = Array.from({ length: 4 }, () => connect('10.0.0.1'));
    const heavyResponses = heavy.flatMap((socket) => send(socket));
    const light = send(connect('10.0.0.2'))[0] as FakeResponse;
    assert.deepEqual(handled, heavyResponses.slice(0, 2));
    await turn();
    heavyResponses[0]?.answer();
    heavyResponses[1]?.answer();
    await turn();
    assert.deepEqual(handled.slice(2), [heavyResponses[2], light], 'the light address’s request gets the second turn');
    assert.equal(subject.pending, 3);
  });

  it('after a pipelining connection is closed for the instance bound, the next is closed as it starts to pipeline, until the held requests fall to half', () => {
    const { subject, overran, connect, send } = setUp({ pending: 10 });
    const holder = connect('10.0.0.1');
    send(holder, 7);
    assert.equal(subject.pending, 7);
    // Three fit under the bound; the fourth closes it, and its three stop counting.
    const first = connect('10.0.0.2');
    send(first, 5);
    assert.equal(first.destroyed, true);
    assert.deepEqual(overran, ['the server holds too many unanswered requests']);
    assert.equal(subject.pending, 7);
    // Room for three more is left, but the second flooder is closed at its third unanswered request.
    const second = connect('10.0.0.3');
    send(second, 5);
    assert.equal(second.destroyed, true, 'a connection pipelining while the server holds most of the bound is closed');
    assert.equal(subject.pending, 7);
    // A connection that waits for each answer is served meanwhile.
    const single = connect('10.0.0.4');
    send(single, 1);
    assert.equal(single.destroyed, false);
    assert.equal(subject.pending, 8);
    // The holder goes: pending falls under half of the bound, and pipelining is let through again.
    holder.destroy();
    assert.equal(subject.pending, 1);
    const later = connect('10.0.0.5');
    send(later, 5);
    assert.equal(later.destroyed, false, 'pipelining is allowed again once the held requests fell');
    assert.equal(subject.pending, 6);
    assert.equal(overran.length, 2);
  });
});
