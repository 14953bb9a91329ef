/**
 * holdStreamingHeapGrowth (src/serve/old-generation.ts) sets a V8 flag at run time, which V8 does not promise to
 * honour: this checks, in Node processes of their own, that the old generation grows less past its survivors while a
 * hold lasts, under an allocation that promotes what it drops (as a bulk stream's lines are, waiting for a commit),
 * so that a Node whose V8 stops reading the flag at each full collection fails here.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';

const MODULE = new URL('../../src/serve/old-generation.js', import.meta.url).href;

/**
 * Some 40 MiB kept alive throughout, and objects that live across a few scavenges before they are dropped, allocated in
 * slices with the event loop turning between them; prints the old space's largest size in MiB. The mode says what is
 * held: nothing, one hold, two holds of which one is released before the allocation, or one hold released before it.
 */
const ALLOCATING = `
import v8 from 'node:v8';
const { holdStreamingHeapGrowth } = await import(${JSON.stringify(MODULE)});
const mode = process.argv[1];
if (mode === 'held') holdStreamingHeapGrowth();
if (mode === 'held twice, released once') {
  holdStreamingHeapGrowth();
  holdStreamingHeapGrowth()();
}
if (mode === 'held, then released') holdStreamingHeapGrowth()();
const kept = Array.from({ length: 400_000 }, (_, index) => ({ index, text: 'kept ' + index, list: [index, index] }));
const ring = new Array(200_000);
let largest = 0;
for (let slice = 0; slice < 400; slice += 1) {
  for (let index = 0; index < 10_000; index += 1) {
    const at = (slice * 10_000 + index) % ring.length;
    ring[at] = { at, text: 'line ' + index, list: [slice, index] };
  }
  const old = v8.getHeapSpaceStatistics().find((space) => space.space_name === 'old_space');
  largest = Math.max(largest, old.space_size);
  await new Promise((resolve) => setImmediate(resolve));
}
if (kept.length !== 400_000) throw new Error('kept');
console.log(largest / 1024 / 1024);
`;

function largestOldSpaceMiB(mode: 'nothing' | 'held' | 'held twice, released once' | 'held, then released'): number {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const output = execFileSync(process.execPath, ['--input-type=module', '-e', ALLOCATING, mode], { env, encoding: 'utf8' });
  return Number(output.trim());
}

describe('the old generation while bulk streams run', () => {
  it('grows less past its survivors while a hold lasts, and as much as V8 lets it once every hold is released', (t) => {
    const free = largestOldSpaceMiB('nothing');
    const held = largestOldSpaceMiB('held');
    const stillHeld = largestOldSpaceMiB('held twice, released once');
    const released = largestOldSpaceMiB('held, then released');
    t.diagnostic(
      `largest old space: ${free.toFixed(0)} MiB without a hold, ${held.toFixed(0)} MiB held, ${stillHeld.toFixed(0)} MiB with one of two holds released, ` +
        `${released.toFixed(0)} MiB with the hold released`,
    );
    assert.ok(held < free * 0.75, `held, the old space (${held.toFixed(0)} MiB) is well under its size without a hold (${free.toFixed(0)} MiB)`);
    assert.ok(stillHeld < free * 0.75, `one hold of two released, the other still holds (${stillHeld.toFixed(0)} MiB against ${free.toFixed(0)} MiB)`);
    assert.ok(released > held / 0.75, `with every hold released, V8 grows the old space as it would (${released.toFixed(0)} MiB against ${held.toFixed(0)} MiB held)`);
  });
});
