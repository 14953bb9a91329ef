/**
 * capYoungGeneration (src/serve/young-generation.ts) sets a V8 flag at run time, which V8 does not promise to honour:
 * this checks, in a Node process of its own, that the young generation stays at the cap under an allocation that
 * grows it past the cap without it, so that a Node whose V8 stops reading the flag at each collection fails here.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { YOUNG_GENERATION_MIB } from '../../src/serve/young-generation.js';

const MODULE = new URL('../../src/serve/young-generation.js', import.meta.url).href;

/**
 * Objects that live across a few collections, as a server's requests in flight do, allocated in slices with the event
 * loop turning between them; prints the new space's size in MiB at the end.
 */
const ALLOCATING = `
import v8 from 'node:v8';
const { capYoungGeneration } = await import(${JSON.stringify(MODULE)});
if (process.argv[1] === 'capped') capYoungGeneration();
const live = [];
for (let slice = 0; slice < 300; slice += 1) {
  for (let index = 0; index < 10_000; index += 1) {
    live.push({ index, text: 'plant ' + index, list: [index] });
    if (live.length > 100_000) live.splice(0, 50_000);
  }
  await new Promise((resolve) => setImmediate(resolve));
}
const newSpace = v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
console.log(newSpace.space_size / 1024 / 1024);
`;

function newSpaceMiB(mode: 'capped' | 'default'): number {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const output = execFileSync(process.execPath, ['--input-type=module', '-e', ALLOCATING, mode], { env, encoding: 'utf8' });
  return Number(output.trim());
}

describe('the young generation of serve', () => {
  it(`stays at ${YOUNG_GENERATION_MIB} MiB under an allocation that grows V8's default past it`, (t) => {
    const uncapped = newSpaceMiB('default');
    assert.ok(uncapped > YOUNG_GENERATION_MIB, `without the cap the new space grew to ${uncapped} MiB, so this allocation does not test the cap`);
    const capped = newSpaceMiB('capped');
    t.diagnostic(`new space: ${uncapped} MiB by default, ${capped} MiB capped`);
    assert.ok(capped <= YOUNG_GENERATION_MIB, `the new space grew to ${capped} MiB under a cap of ${YOUNG_GENERATION_MIB}`);
  });
});
