import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChangeFeed, FeedBatch, type FeedSubscriber } from '../../src/feed/change-feed.js';
import { changeEvent } from '../../src/feed/events.js';
import type { ChangeLog, PlantChange } from '../../src/storage/change-store.js';

const at = new Date(0);
const created = (sequence: bigint, name = `plant ${sequence}`): PlantChange => ({ sequence, kind: 'created', plant: { id: sequence, name, tag: null }, at });

/** A change log in memory that counts its reads; `commit` appends and tells the listener, as the SQLite write path does. */
class MemoryLog implements ChangeLog {
  readonly changes: PlantChange[] = [];
  reads = 0;
  #listener: (() => void) | undefined;

  async changesAfter(sequence: bigint, limit: number): Promise<PlantChange[]> {
    this.reads += 1;
    return this.changes.filter((change) => change.sequence > sequence).slice(0, limit);
  }

  async newestSequence(): Promise<bigint> {
    return this.changes.at(-1)?.sequence ?? 0n;
  }

  async oldestRetained(): Promise<bigint | undefined> {
    return this.changes[0]?.sequence;
  }

  onCommitted(listener: () => void): () => void {
    this.#listener = listener;
    return () => {
      this.#listener = undefined;
    };
  }

  commit(...changes: PlantChange[]): void {
    this.changes.push(...changes);
    this.#listener?.();
  }
}

/**
 * A stream as the feed sees it: what it was handed, as text, and the buffers it was handed. `writeMs` is how long
 * each hand-over keeps the thread busy, as a socket's write would: enough of them spread one read over several slices.
 */
class Recorder implements FeedSubscriber {
  cursor: bigint;
  text = '';
  readonly buffers: Buffer[] = [];
  readonly #writeMs: number;

  constructor(cursor: bigint, writeMs = 0) {
    this.cursor = cursor;
    this.#writeMs = writeMs;
  }

  deliver(batch: FeedBatch): void {
    for (const began = performance.now(); performance.now() - began < this.#writeMs; );
    const events = batch.after(this.cursor);
    if (!events) return;
    this.cursor = batch.last;
    this.buffers.push(events.bytes);
    this.text += events.bytes.toString();
  }
}

const until = async (what: string, condition: () => boolean) => {
  for (let turn = 0; !condition(); turn += 1) {
    assert.ok(turn < 10_000, `never: ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
};

describe('FeedBatch', () => {
  it('encodes each event once and hands a stream the events after its cursor as a view of the one buffer', () => {
    const changes = [created(5n, 'é'), created(6n), created(7n, '🌵')];
    const batch = new FeedBatch(
      changes.map((change) => change.sequence),
      changes.map((change) => changeEvent(change)),
    );
    assert.equal(batch.last, 7n);
    assert.equal(batch.bytes.toString(), changes.map((change) => changeEvent(change)).join(''));
    const all = batch.after(4n);
    assert.equal(all?.count, 3);
    assert.equal(all?.bytes, batch.bytes, 'a stream at the position gets the buffer itself');
    const lastTwo = batch.after(5n);
    assert.equal(lastTwo?.count, 2);
    assert.equal(lastTwo?.bytes.toString(), changeEvent(changes[1] as PlantChange) + changeEvent(changes[2] as PlantChange));
    assert.equal(lastTwo?.bytes.buffer, batch.bytes.buffer, 'a view, not a copy');
    assert.equal(batch.after(6n)?.bytes.toString(), changeEvent(changes[2] as PlantChange), 'multi-byte text before it is skipped by bytes, not characters');
    assert.equal(batch.after(7n), undefined);
    assert.equal(batch.after(100n), undefined);
  });
});

describe('ChangeFeed', () => {
  const options = { render: changeEvent, batchSize: 3, pollMs: 60_000, loopShare: 0.5, maxIntervalMs: 0, onError: (error: unknown) => assert.fail(String(error)) };

  it('reads the log once per wake-up for all streams, and hands each one shared buffer per read', async () => {
    const log = new MemoryLog();
    log.changes.push(created(1n));
    const feed = new ChangeFeed(log, options);
    await feed.start();
    const streams = Array.from({ length: 50 }, () => new Recorder(feed.position));
    for (const stream of streams) feed.subscribe(stream);
    const readsBefore = log.reads;
    log.commit(created(2n), created(3n));
    await until('every stream has 3', () => streams.every((stream) => stream.cursor === 3n));
    assert.equal(log.reads - readsBefore, 1, 'one read for fifty streams');
    const [first] = streams;
    for (const stream of streams) {
      assert.equal(stream.buffers.length, 1);
      assert.equal(stream.buffers[0], first?.buffers[0], 'the same buffer, encoded once');
      assert.equal(stream.text, changeEvent(created(2n)) + changeEvent(created(3n)));
    }
    feed.close();
  });

  it('hands every change to every stream once and in order: reads longer than a slice, more than a read holds, streams joining and leaving on the way', async () => {
    const log = new MemoryLog();
    const feed = new ChangeFeed(log, options);
    await feed.start();
    const staying = Array.from({ length: 20 }, () => new Recorder(0n, 0.5));
    const leaving = new Recorder(0n);
    for (const stream of staying) feed.subscribe(stream);
    const unsubscribe = feed.subscribe(leaving);
    let joining: Recorder | undefined;
    let joinedAt = 0n;
    let sequence = 0n;
    const expected: string[] = [];
    const all: PlantChange[] = [];
    for (let commit = 0; commit < 30; commit += 1) {
      const changes = Array.from({ length: 1 + (commit % 7) }, () => created((sequence += 1n)));
      expected.push(...changes.map((change) => changeEvent(change)));
      all.push(...changes);
      log.commit(...changes);
      if (commit === 10) unsubscribe();
      if (commit === 20) {
        // As a stream joins after its backlog: at the feed's position, whatever a read in progress has handed out.
        joinedAt = feed.position;
        joining = new Recorder(joinedAt);
        staying.push(joining);
        feed.subscribe(joining);
      }
      if (commit % 3 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await until('every stream has the last change', () => staying.every((stream) => stream.cursor === sequence));
    for (const stream of staying) {
      if (stream === joining) {
        const after = joinedAt;
        assert.equal(stream.text, all.filter((change) => change.sequence > after).map((change) => changeEvent(change)).join(''), 'the one that joined: all after its cursor');
        assert.notEqual(stream.text, '');
      }
      else assert.equal(stream.text, expected.join(''));
    }
    assert.ok(expected.join('').startsWith(leaving.text), 'the one that left got a prefix, nothing after');
    feed.close();
  });
});
