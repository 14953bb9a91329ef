import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { changeEvent, resetEvent } from '../../src/feed/events.js';

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

