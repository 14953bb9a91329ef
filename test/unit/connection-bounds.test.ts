/**
 * ConnectionBounds' choice of which connection to close when the server holds too many unanswered requests, on
 * sockets, requests and responses that are only event emitters: once a pipelining connection has been closed for the
 * instance bound, the next one is closed as soon as it pipelines, not after it has filled the room left.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import { ConnectionBounds, type ConnectionOverrun } from '../../src/http/connection-bounds.js';

class FakeSocket extends EventEmitter {
  destroyed = false;
  writableLength = 0;
  destroy(): this {
    if (!this.destroyed) {
      this.destroyed = true;
      this.emit('close');
    }
    return this;
  }
}

class FakeResponse extends EventEmitter {
  destroy(): void {
    this.emit('close');
  }
}

const LIMITS = { handledAtOnce: 2, unanswered: 100, bufferedBytes: 1024 * 1024, stalledMs: 60_000 };
const MAX_PENDING = 10;

function setUp() {
  const handled: IncomingMessage[] = [];
  const closed: Array<{ socket: FakeSocket; why: ConnectionOverrun }> = [];
  const bounds = new ConnectionBounds(
    (request) => handled.push(request),
    LIMITS,
    (socket, why) => closed.push({ socket: socket as unknown as FakeSocket, why }),
    MAX_PENDING,
  );
  /** Sends `count` requests on `socket` as Node's parser would hand them over, in one go. */
  const send = (socket: FakeSocket, count: number) => {
    for (let index = 0; index < count && !socket.destroyed; index += 1) {
      const request = { socket, destroy: () => undefined } as unknown as IncomingMessage;
      bounds.handle(request, new FakeResponse() as unknown as ServerResponse);
    }
  };
  return { bounds, handled, closed, send };
}

describe('ConnectionBounds under MAX_PENDING_REQUESTS', () => {
  it('after a pipelining connection is closed for the instance bound, the next is closed as it starts to pipeline, until the held requests fall to half', async () => {
    const { bounds, handled, closed, send } = setUp();
    try {
      const holder = new FakeSocket();
      send(holder, 7);
      assert.equal(bounds.pending, 7);
      // Three fit under the bound; the fourth closes it, and its three stop counting.
      const first = new FakeSocket();
      send(first, 5);
      assert.equal(first.destroyed, true);
      assert.deepEqual(closed.map(({ why }) => why), ['the server holds too many unanswered requests']);
      assert.equal(bounds.pending, 7);
      // Room for three more is left, but the second flooder is closed at its third unanswered request.
      const second = new FakeSocket();
      send(second, 5);
      assert.equal(second.destroyed, true, 'a connection pipelining while the server holds most of the bound is closed');
      assert.equal(bounds.pending, 7);
      // A connection that waits for each answer is served meanwhile.
      const single = new FakeSocket();
      send(single, 1);
      assert.equal(single.destroyed, false);
      assert.equal(bounds.pending, 8);
      // The holder goes: pending falls under half of the bound, and pipelining is let through again.
      holder.destroy();
      assert.equal(bounds.pending, 1);
      const later = new FakeSocket();
      send(later, 5);
      assert.equal(later.destroyed, false, 'pipelining is allowed again once the held requests fell');
      assert.equal(bounds.pending, 6);
      await new Promise((resolve) => setImmediate(resolve));
      // Handlers start only from the release after parsing, at most handledAtOnce per connection, never for the closed.
      assert.deepEqual(
        handled.map((request) => [single, later].indexOf(request.socket as unknown as FakeSocket)),
        [0, 1, 1],
      );
      assert.equal(closed.length, 2);
    } finally {
      bounds.stop();
    }
  });
});
