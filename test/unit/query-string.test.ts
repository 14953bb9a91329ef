/**
 * parseQueryString, the router's query parser: form decoding (`+` is a space), repeated names as arrays, and a
 * malformed escape or invalid UTF-8 as an error carried under QUERY_ERROR (thrown later, after authentication).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { QUERY_ERROR, parseQueryString } from '../../src/http/query-string.js';

/** The parsed parameters, in order, without the error (a symbol key, which Object.entries leaves out). */
function parameters(query: string): Array<[string, string | string[]]> {
  return Object.entries(parseQueryString(query));
}

describe('parseQueryString', () => {
  const decoded: ReadonlyArray<readonly [query: string, expected: Record<string, string | string[]>]> = [
    ['', {}],
    ['limit=5', { limit: '5' }],
    ['limit=5&tag=x', { limit: '5', tag: 'x' }],
    // Repeated names become arrays, in order; the schema then refuses them.
    ['limit=1&limit=2', { limit: ['1', '2'] }],
    ['a=1&a=2&a=3', { a: ['1', '2', '3'] }],
    // No '=' or nothing after it: the empty string.
    ['tag', { tag: '' }],
    ['tag=', { tag: '' }],
    ['=x', { '': 'x' }],
    // Empty pairs are skipped.
    ['&&limit=5&', { limit: '5' }],
    // Only the first '=' separates.
    ['tag=a=b', { tag: 'a=b' }],
    ['tag=a+b', { tag: 'a b' }],
    ['tag=a%2Bb', { tag: 'a+b' }],
    ['tag=%25', { tag: '%' }],
    ['tag=%25FF', { tag: '%FF' }],
    ['tag=%20x%20', { tag: ' x ' }],
    ['tag=%E2%9C%93', { tag: '✓' }],
    ['tag=%F0%9F%8C%B1', { tag: '🌱' }],
    ['tag=%f0%9f%8c%b1', { tag: '🌱' }],
    ['a%3Db=c', { 'a=b': 'c' }],
    ['t+g=x', { 't g': 'x' }],
    ['tag=%26', { tag: '&' }],
    // Plain keys, never the prototype: the result has none.
    ['__proto__=x', { ['__proto__']: 'x' }],
    ['constructor=x&toString=y', { constructor: 'x', toString: 'y' }],
  ];
  for (const [query, expected] of decoded) {
    it(`${JSON.stringify(query)} → ${JSON.stringify(expected)}`, () => {
      const parsed = parseQueryString(query);
      assert.equal(parsed[QUERY_ERROR], undefined);
      assert.equal(Object.getPrototypeOf(parsed), null);
      assert.deepEqual(parameters(query), Object.entries(expected));
    });
  }

  const malformed: ReadonlyArray<readonly [query: string, message: string, rest: Record<string, string | string[]>]> = [
    ['tag=%', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    ['tag=%F', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    ['tag=%ZZ', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    ['tag=%FF', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    ['tag=%C0%AF', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    // An encoded lone surrogate is not UTF-8.
    ['tag=%ED%A0%80', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    ['tag=%E2%9C', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    ['%FF=1', 'a query parameter name is not valid percent-encoded UTF-8', {}],
    ['%=1', 'a query parameter name is not valid percent-encoded UTF-8', {}],
    // The first error is the one reported; well-formed parameters are still read.
    ['a=%FF&b=%FF', 'querystring.a is not valid percent-encoded UTF-8', {}],
    ['tag=%FF&%FF=1', 'querystring.tag is not valid percent-encoded UTF-8', {}],
    ['%FF=1&tag=%FF', 'a query parameter name is not valid percent-encoded UTF-8', {}],
    ['limit=5&tag=%&x=1', 'querystring.tag is not valid percent-encoded UTF-8', { limit: '5', x: '1' }],
  ];
  for (const [query, message, rest] of malformed) {
    it(`${JSON.stringify(query)} → 400 ${JSON.stringify(message)}`, () => {
      const parsed = parseQueryString(query);
      assert.equal(parsed[QUERY_ERROR]?.status, 400);
      assert.equal(parsed[QUERY_ERROR]?.message, message);
      assert.deepEqual(parameters(query), Object.entries(rest));
    });
  }
});

describe('parseQueryString cost', () => {
  /** CPU milliseconds this process has spent: time waiting for a core on a loaded machine is not in it. */
  function cpuMs(): number {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  }

  /**
   * CPU milliseconds per parse of `query`, parsed `times` times a round: the cheapest round. CPU time, not the wall
   * clock, which on a loaded machine counts the waits for a core, unevenly between the sizes compared. What is left
   * adds cost only (a collection in the middle of a round), so the cheapest round is nearest the parse's own.
   */
  function bestParseCost(query: string, times: number, rounds: number): number {
    let best = Infinity;
    for (let round = 0; round < rounds; round += 1) {
      const start = cpuMs();
      for (let time = 0; time < times; time += 1) parseQueryString(query);
      best = Math.min(best, (cpuMs() - start) / times);
    }
    return best;
  }

  it('is linear in the number of repeats of one name: 16,000 cost about 16 times 1,000, far from the 256 of quadratic', () => {
    const repeated = (count: number) => Array.from({ length: count }, () => 'a').join('&');
    const [small, large] = [repeated(1000), repeated(16_000)];
    // Warm-up: both sizes compiled and their arrays' growth seen before anything is timed.
    bestParseCost(small, 160, 2);
    bestParseCost(large, 10, 2);
    // Each round parses about the same bytes of either size.
    let [smallBest, largeBest] = [Infinity, Infinity];
    for (let pass = 0; pass < 5; pass += 1) {
      smallBest = Math.min(smallBest, bestParseCost(small, 160, 3));
      largeBest = Math.min(largeBest, bestParseCost(large, 10, 3));
    }
    const ratio = largeBest / smallBest;
    // A wide separation, so no machine's load decides it: linear gives about 16, quadratic about 256.
    assert.ok(ratio < 40, `16,000 repeats cost ${ratio.toFixed(1)} times as much CPU as 1,000`);
    assert.equal((parseQueryString(large).a as string[]).length, 16_000);
  });
});
