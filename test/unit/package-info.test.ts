/**
 * The runtime check the launcher makes before loading anything else: which Node.js releases `engines.node` admits,
 * and the one line an older one gets. package.json is read as the launcher reads it, so a change to `engines` that
 * the check cannot read fails here rather than in an operator's terminal.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { minimumNode, readPackageInfo, unsupportedNodeMessage } from '../../src/cli/package-info.js';

describe('unsupportedNodeMessage', () => {
  const cases: ReadonlyArray<readonly [running: string, range: string, expected: string | undefined]> = [
    ['v20.20.2', '>=22', 'plantstore needs Node.js 22 or later; this is v20.20.2'],
    ['v21.99.99', '>=22', 'plantstore needs Node.js 22 or later; this is v21.99.99'],
    ['v18.0.0', '>=22', 'plantstore needs Node.js 22 or later; this is v18.0.0'],
    ['v22.0.0', '>=22', undefined],
    ['v24.21.0', '>=22', undefined],
    ['v26.10.0', '>=22', undefined],
    ['v100.0.0', '>=22', undefined],
    ['v22.12.9', '>=22.13', 'plantstore needs Node.js 22.13 or later; this is v22.12.9'],
    ['v22.13.0', '>=22.13', undefined],
    ['v22.13.0', '>= 22.13.1', 'plantstore needs Node.js 22.13.1 or later; this is v22.13.0'],
    ['v23.0.0', '>=22.13.1', undefined],
    ['v22.0.0-nightly20240101', '>=22', undefined],
    ['v20.20.2', '>=v22.5', 'plantstore needs Node.js 22.5 or later; this is v20.20.2'],
  ];
  for (const [running, range, expected] of cases) {
    it(`${running} against ${range}: ${expected ?? 'supported'}`, () => {
      assert.equal(unsupportedNodeMessage(running, range), expected);
    });
  }
});

describe('minimumNode', () => {
  it('refuses a range it cannot read, rather than letting every release through', () => {
    for (const range of ['^22', '22.x', '>=22 <27', '>=22 || >=20.19', '', '*']) {
      assert.throws(() => minimumNode(range), /is not of the form >=MAJOR/, range);
    }
  });
});

describe("package.json's engines.node", () => {
  it('is a range the runtime check reads, and this Node.js passes it', () => {
    const { nodeRange, version } = readPackageInfo();
    assert.match(version, /^\d+\.\d+\.\d+/);
    assert.ok(minimumNode(nodeRange).parts.length >= 1);
    assert.equal(unsupportedNodeMessage(process.version, nodeRange), undefined, `${process.version} against ${nodeRange}`);
  });
});
