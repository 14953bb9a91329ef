/**
 * The packed form a batch of creates and its outcomes take between a worker thread and the instance's writer: every
 * plant arrives as sent (exact int64 ids, any text, null and empty tags apart), every outcome as the store gave it,
 * and errors keep what decides their answer (unavailable → 503). The pack travels by structured clone, as postMessage
 * sends it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import type { CreateOutcome } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import { fromWireError, packOutcomes, packPlants, toWireError, unpackOutcomes, unpackPlants, unpackTraceparents } from '../../src/workers/wire.js';

const PLANTS: Plant[] = [
  { id: 1n, name: 'Fern', tag: null },
  { id: 9007199254740993n, name: 'Monstera', tag: 'aroid' },
  { id: INT64_MAX, name: 'max', tag: '' },
  { id: INT64_MIN, name: 'min', tag: 'a' },
  { id: -1n, name: '🌱 中文字 "quoted" \\ back\u2028slash', tag: '🪴' },
  { id: 0n, name: 'x'.repeat(300), tag: 'y'.repeat(64) },
];

/** What a message's receiver gets. */
const posted = <T>(value: T): T => structuredClone(value);

describe('packed plants', () => {
  it('arrive exactly as sent, across a structured clone', () => {
    assert.deepEqual(unpackPlants(posted(packPlants(PLANTS))), PLANTS);
  });

  it('keep a null tag and an empty tag apart, and an empty batch empty', () => {
    const [none, empty] = unpackPlants(posted(packPlants([PLANTS[0] as Plant, PLANTS[2] as Plant])));
    assert.equal(none?.tag, null);
    assert.equal(empty?.tag, '');
    assert.deepEqual(unpackPlants(posted(packPlants([]))), []);
  });

  it('are three values whatever the batch size: what a structured clone costs per value is paid three times, not per plant', () => {
    const packed = packPlants(Array.from({ length: 500 }, (_, index) => ({ id: BigInt(index), name: `n${index}`, tag: null })));
    assert.deepEqual(Object.keys(packed).sort(), ['ids', 'lengths', 'text']);
    assert.equal(typeof packed.text, 'string');
  });
});

describe('packed traceparents', () => {
  const traced = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  it('arrive aligned with the plants, an untraced plant undefined, across a structured clone', () => {
    const traceparents = [traced, undefined, undefined, traced, undefined, undefined];
    const packed = posted(packPlants(PLANTS, traceparents));
    assert.deepEqual(unpackPlants(packed), PLANTS);
    assert.deepEqual(unpackTraceparents(packed), traceparents);
  });

  it('add nothing to a batch no plant of which was traced', () => {
    for (const packed of [packPlants(PLANTS), packPlants(PLANTS, PLANTS.map(() => undefined))]) {
      assert.deepEqual(Object.keys(packed).sort(), ['ids', 'lengths', 'text']);
      assert.equal(unpackTraceparents(posted(packed)), undefined);
    }
  });
});

describe('packed outcomes', () => {
  it('are one number when every row was created', () => {
    const created: CreateOutcome[] = [{ kind: 'created' }, { kind: 'created' }];
    assert.equal(packOutcomes(created), 2);
    assert.deepEqual(unpackOutcomes(posted(packOutcomes(created))), created);
  });

  it('keep each row of a mixed batch in order: created, existing with the stored plant, failed with its error', () => {
    // As node:sqlite throws it: its code, and SQLite's extended result code (SQLITE_CONSTRAINT_CHECK).
    const constraint = Object.assign(new Error('CHECK constraint failed: name'), { code: 'ERR_SQLITE_ERROR', errcode: 275 });
    const outcomes: CreateOutcome[] = [
      { kind: 'existing', stored: PLANTS[1] as Plant },
      { kind: 'created' },
      { kind: 'failed', error: constraint },
      { kind: 'existing', stored: PLANTS[3] as Plant },
      { kind: 'failed', error: new StorageUnavailableError('disk full') },
    ];
    const received = unpackOutcomes(posted(packOutcomes(outcomes)));
    assert.equal(received.length, outcomes.length);
    assert.deepEqual(received[0], outcomes[0]);
    assert.deepEqual(received[1], { kind: 'created' });
    assert.deepEqual(received[3], outcomes[3]);
    const failed = received[2] as Extract<CreateOutcome, { kind: 'failed' }>;
    assert.equal(failed.error.message, 'CHECK constraint failed: name');
    assert.equal((failed.error as { code?: string }).code, 'ERR_SQLITE_ERROR');
    assert.equal((failed.error as { errcode?: number }).errcode, 275);
    assert.ok(!(failed.error instanceof StorageUnavailableError));
    const unavailable = received[4] as Extract<CreateOutcome, { kind: 'failed' }>;
    assert.ok(unavailable.error instanceof StorageUnavailableError, 'still a 503');
    assert.equal(unavailable.error.message, 'disk full');
  });
});

describe('wire errors', () => {
  it('rebuild StorageUnavailableError as itself (503), anything else as an error of its name, message and code', () => {
    assert.ok(fromWireError(posted(toWireError(new StorageUnavailableError()))) instanceof StorageUnavailableError);
    const other = fromWireError(posted(toWireError(Object.assign(new TypeError('boom'), { code: 'E_X' }))));
    assert.deepEqual([other.name, other.message, (other as { code?: string }).code], ['TypeError', 'boom', 'E_X']);
    assert.equal(fromWireError(posted(toWireError('a string thrown'))).message, 'a string thrown');
  });
});
