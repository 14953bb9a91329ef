/**
 * The bulk scenario's client (bench/scenarios/bulk.ts runs it pinned to the load core): `streams` concurrent streamed
 * bulk creates (POST /plants as application/x-ndjson), each writing lines shaped like the create scenario's bodies
 * for `seconds` (or `lines` lines in all, for the memory run), as fast as the server takes them. Prints one JSON line:
 * result lines answered 200, answered otherwise, and the seconds from the first byte sent to the last result read.
 */
import { openBulkCreate } from '../test/helpers/bulk.js';

interface BulkSpec {
  readonly url: string;
  readonly token: string;
  readonly streams: number;
  /** Stop writing after this long; 0 with `lines`. */
  readonly seconds: number;
  /** Lines per stream at most (0: until `seconds`). */
  readonly lines: number;
  /** The first id; stream s sends ids firstId + s, firstId + s + streams, ... */
  readonly firstId: number;
}

const NAMES = ['Monstera deliciosa', 'Ficus lyrata', 'Pilea peperomioides', 'Calathea orbifolia'];
const TAGS = ['aroid', 'fig', 'pilea', undefined];

function line(id: number): string {
  const k = id % 4;
  const tag = TAGS[k];
  return tag === undefined ? `{"id":${id},"name":"${NAMES[k]}"}\n` : `{"id":${id},"name":"${NAMES[k]}","tag":"${tag}"}\n`;
}

function stream(spec: BulkSpec, index: number, deadline: number): Promise<{ ok: number; other: number; lines: number }> {
  return new Promise((resolve, reject) => {
    const request = openBulkCreate(spec.url, spec.token);
    let sent = 0;
    let id = spec.firstId + index;
    const more = () => {
      for (;;) {
        if ((spec.lines > 0 && sent >= spec.lines) || (spec.seconds > 0 && performance.now() >= deadline)) {
          request.end();
          return;
        }
        let text = '';
        for (let i = 0; i < 1000 && !(spec.lines > 0 && sent >= spec.lines); i += 1, sent += 1, id += spec.streams) text += line(id);
        if (!request.write(text)) {
          request.once('drain', more);
          return;
        }
      }
    };
    request.on('error', reject);
    request.on('response', (response) => {
      let ok = 0;
      let other = 0;
      let rest = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        const text = rest + chunk;
        const end = text.lastIndexOf('\n');
        rest = text.slice(end + 1);
        // Every result line has `"status":` once; 200s are counted by their text, the rest by difference.
        let at = 0;
        for (;;) {
          const found = text.indexOf('"status":', at);
          if (found === -1 || found > end) break;
          if (text.startsWith('200', found + 9)) ok += 1;
          else other += 1;
          at = found + 9;
        }
      });
      response.on('end', () => resolve({ ok, other, lines: sent }));
      response.on('error', reject);
    });
    more();
  });
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as BulkSpec;
  const started = performance.now();
  const deadline = started + spec.seconds * 1000;
  const results = await Promise.all(Array.from({ length: spec.streams }, (_, index) => stream(spec, index, deadline)));
  const seconds = (performance.now() - started) / 1000;
  const ok = results.reduce((sum, result) => sum + result.ok, 0);
  const other = results.reduce((sum, result) => sum + result.other, 0);
  const lines = results.reduce((sum, result) => sum + result.lines, 0);
  process.stdout.write(`${JSON.stringify({ ok, other, lines, seconds, plantsPerSec: ok / seconds })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bulk-client: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
