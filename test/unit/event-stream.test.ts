import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { changeEvent, resetEvent } from '../../src/feed/events.js';
import { acceptsEventStream, parseCursor } from '../../src/http/event-stream.js';
import { StreamLimits } from '../../src/http/stream-limits.js';
import { pruneThrough } from '../../src/storage/change-store.js';

describe('the event stream cursor (Last-Event-ID, ?after=)', () => {
  it('takes a non-negative canonical decimal integer within int64', () => {
    assert.equal(parseCursor('0', 'after'), 0n);
    assert.equal(parseCursor('9223372036854775807', 'after'), 9223372036854775807n);
    for (const bad of ['', '-1', '01', '+1', '1.0', '1e3', ' 1', '9223372036854775808', '99999999999999999999', 'x']) {
      assert.throws(() => parseCursor(bad, 'querystring.after'), /querystring\.after must be a non-negative integer/, bad);
    }
  });
});

describe('acceptsEventStream', () => {
  it('takes no Accept, text/event-stream, text/* and */* with a non-zero q; refuses the rest', () => {
    for (const accept of [undefined, '', 'text/event-stream', 'text/*', '*/*', 'application/json, text/event-stream;q=0.5', 'TEXT/EVENT-STREAM']) {
      assert.equal(acceptsEventStream(accept), true, String(accept));
    }
    for (const accept of ['application/json', 'text/event-stream;q=0', 'text/html, application/*']) assert.equal(acceptsEventStream(accept), false, accept);
  });
});

describe('the events written', () => {
  it('writes each change as one event with its sequence as id and exact ids in data; a reset names the newest sequence', () => {
    const at = new Date();
    assert.equal(
      changeEvent({ sequence: 7n, kind: 'created', plant: { id: -9223372036854775808n, name: 'a\nb', tag: null }, at }),
      'event: plant.created\nid: 7\ndata: {"id":-9223372036854775808,"name":"a\\nb"}\n\n',
    );
    assert.equal(changeEvent({ sequence: 8n, kind: 'deleted', id: 9007199254740993n, at }), 'event: plant.deleted\nid: 8\ndata: {"id":9007199254740993}\n\n');
    assert.match(resetEvent(12n), /^event: reset\nid: 12\ndata: \{"message":"[^\n]*list the store again[^\n]*"\}\n\n$/);
  });
});

describe('pruneThrough', () => {
  it('prunes past the newest maxCount and what expired, never the newest change', () => {
    assert.equal(pruneThrough(0n, 10, undefined), undefined);
    assert.equal(pruneThrough(5n, 10, undefined), undefined);
    assert.equal(pruneThrough(15n, 10, undefined), 5n);
    assert.equal(pruneThrough(15n, 10, 8n), 8n);
    assert.equal(pruneThrough(15n, 10, 3n), 5n);
    assert.equal(pruneThrough(15n, 10, 15n), 14n);
    assert.equal(pruneThrough(15n, 0, undefined), 14n);
  });
});

describe('StreamLimits', () => {
  it('counts streams per token and per address, refuses one more with 429, and releases each once', () => {
    const limits = new StreamLimits(2, 3);
    const a1 = limits.open('a', '10.0.0.1');
    limits.open('a', '10.0.0.2');
    assert.throws(() => limits.open('a', '10.0.0.3'), (error: { status?: number }) => error.status === 429);
    a1();
    a1();
    limits.open('a', '10.0.0.3');
    assert.throws(() => limits.open('a', '10.0.0.3'), /token/);
    limits.open('b', '10.0.0.1');
    limits.open('c', '10.0.0.1');
    limits.open('d', '10.0.0.1');
    assert.throws(() => limits.open('e', '10.0.0.1'), /address/);
  });
});
