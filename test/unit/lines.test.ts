/**
 * readLines (src/transfer/lines.ts) alone: lines split across chunks, over-long lines reported by length, and (with
 * blankRuns, as a bulk create reads) runs of blank lines given as one line numbered as the last of the run, so that
 * what follows keeps its number.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readLines, type InputLine } from '../../src/transfer/lines.js';

async function* chunksOf(...chunks: string[]): AsyncGenerator<Buffer> {
  for (const chunk of chunks) yield Buffer.from(chunk);
}

/** Every line read, as [number, text] or [number, 'too long: N']. */
async function linesOf(chunks: AsyncIterable<Buffer>, maxBytes = 100, blankRuns = false): Promise<Array<[number, string]>> {
  const read: Array<[number, string]> = [];
  for await (const lines of readLines(chunks, maxBytes, { blankRuns })) {
    for (const line of lines as InputLine[]) read.push([line.number, 'text' in line ? String(line.text) : `too long: ${line.tooLongBytes}`]);
  }
  return read;
}

describe('readLines', () => {
  it('splits at \\n across chunks and reports an over-long line by its length', async () => {
    assert.deepEqual(await linesOf(chunksOf('{"a"', ':1}\nxx', 'xxxxxxxx\nlast'), 6), [
      [1, 'too long: 7'],
      [2, 'too long: 10'],
      [3, 'last'],
    ]);
  });

  it('gives every blank line by default', async () => {
    assert.deepEqual(await linesOf(chunksOf('a\n\n \nb')), [
      [1, 'a'],
      [2, ''],
      [3, ' '],
      [4, 'b'],
    ]);
  });

  it('with blankRuns, gives a run of blank lines in a chunk as one empty line numbered as its last, keeping the numbers after it', async () => {
    assert.deepEqual(await linesOf(chunksOf('a\n\n\n \t\r\n\nb\n\r\n', '\n\nc\n'), 100, true), [
      [1, 'a'],
      [5, ''],
      [6, 'b'],
      [7, ''],
      [9, ''],
      [10, 'c'],
    ]);
  });

  it('reads ten million blank lines as a handful of lines', async () => {
    const chunk = '\n'.repeat(1_000_000);
    let count = 0;
    let last = 0;
    for await (const lines of readLines(chunksOf(...Array<string>(10).fill(chunk)), 100, { blankRuns: true })) {
      count += lines.length;
      last = lines.at(-1)?.number ?? last;
    }
    assert.equal(count, 10);
    assert.equal(last, 10_000_000);
  });
});
