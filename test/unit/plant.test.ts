import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Plant } from '../../src/plant.js';
import { isSamePlant } from '../../src/plants/replay.js';

/** The replay rule (the domain's; storage only reports the plant it found under the id). */
describe('isSamePlant', () => {
  const stored: Plant = { id: 9007199254740993n, name: 'Monstera', tag: 'aroid' };

  it('calls the same id, name and tag a replay', () => {
    assert.equal(isSamePlant(stored, { id: 9007199254740993n, name: 'Monstera', tag: 'aroid' }), true);
  });

  it('calls another name or tag, or an empty tag where none is stored, a conflict', () => {
    assert.equal(isSamePlant(stored, { ...stored, name: 'monstera' }), false);
    assert.equal(isSamePlant(stored, { ...stored, tag: null }), false);
    assert.equal(isSamePlant({ ...stored, tag: null }, { ...stored, tag: '' }), false);
  });

  it('compares ids exactly, beyond a double', () => {
    assert.equal(isSamePlant(stored, { ...stored, id: 9007199254740992n }), false);
  });
});
