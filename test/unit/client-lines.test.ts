/**
 * The client's byte-level NDJSON (src/client/lines.ts, src/client/bulk.ts): result lines cut from reads split
 * anywhere (inside a line, inside a character), decoded a segment at a time; and createMany's request body, whose
 * lines are encoded into chunks and may span two of them, sent byte for byte as the plants say.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PlantStore, type NewPlant } from '../../src/client/index.js';
import { decodedLines, wholeLines } from '../../src/client/lines.js';

function streamOf(pieces: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  let next = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (next < pieces.length) controller.enqueue(pieces[next++] as Uint8Array);
      else controller.close();
    },
  });
}

async function linesOf(pieces: readonly Uint8Array[], max = 1 << 20): Promise<string[]> {
  const decoder = new TextDecoder();
  const lines: string[] = [];
  for await (const bytes of wholeLines(streamOf(pieces), max)) lines.push(...decodedLines(bytes, decoder));
  return lines;
}

describe('result lines read as bytes', () => {
  const text = '{"a":"é€😀"}\r\n\n{"b":2}\n' + `{"c":"${'x'.repeat(5000)}"}\n` + '{"d":"ü"}\n'.repeat(600) + '{"last":true}';
  const bytes = new TextEncoder().encode(text);
  const expected = text.split('\n').map((line) => line.replace(/\r$/, '')).filter((line) => line !== '');

  it('gives every line once, whatever the reads, CRLF and blank lines handled, a last line without LF kept', async () => {
    assert.deepEqual(await linesOf([bytes]), expected);
    for (const cut of [1, 3, 8, 9, 10, 4097, 5020, bytes.length - 1]) {
      assert.deepEqual(await linesOf([bytes.subarray(0, cut), bytes.subarray(cut)]), expected, `cut at ${cut}`);
    }
    const small: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i += 7) small.push(bytes.subarray(i, i + 7));
    assert.deepEqual(await linesOf(small), expected);
  });

  it('refuses a line longer than the bound', async () => {
    await assert.rejects(linesOf([new TextEncoder().encode('x'.repeat(100))], 50), /more than 50 bytes/);
  });
});

describe("createMany's request body", () => {
  it('sends every plant as one line, exactly, across chunk boundaries and multi-byte names, and numbers the results', async () => {
    const plants: NewPlant[] = [];
    for (let k = 0; k < 3000; k += 1) {
      const id = 2n ** 63n - 1n - BigInt(k);
      plants.push(k % 7 === 0 ? { id, name: `ñ😀${'é'.repeat(k % 50)}`, tag: 'ü' } : { id, name: `plant-${k}` });
    }
    plants.push({ id: -(2n ** 63n), name: 'z'.repeat(70_000) });
    let chunks = 0;
    const fetcher = (async (_url: unknown, init?: RequestInit) => {
      const parts: Uint8Array[] = [];
      for await (const part of init?.body as ReadableStream<Uint8Array>) parts.push(part);
      chunks = parts.length;
      const sent = new TextDecoder().decode(Buffer.concat(parts)).split('\n');
      assert.equal(sent.pop(), '', 'the body ends with a line end');
      const answer = sent.map((line, index) => `${JSON.stringify({ line: index + 1, status: 200, created: true, plant: { name: (JSON.parse(line) as { name: string }).name } })}\n`).join('');
      return new Response(answer, { status: 200 });
    }) as typeof fetch;
    const results = [];
    for await (const result of new PlantStore({ url: 'http://plantstore.invalid', fetch: fetcher }).createMany(plants, { stream: true })) results.push(result);
    assert.ok(chunks > 2, 'the body went in several chunks');
    assert.equal(results.length, plants.length);
    results.forEach((result, index) => {
      assert.equal(result.line, index + 1);
      assert.equal(result.id, plants[index]?.id);
      assert.equal('plant' in result ? result.plant.name : undefined, plants[index]?.name);
    });
  });
});
