import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { acceptsEventStream, parseCursor } from '../../src/http/event-stream-request.js';

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

