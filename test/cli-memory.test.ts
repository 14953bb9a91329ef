import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { CLI, runCli } from './helpers/process.js';

const PROBE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'helpers', 'heap-probe.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-cli-memory-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A migrated SQLite database of `rows` plants with the longest names the default limit allows: many bytes per row. */
function database(rows: number): string {
  const file = path.join(dir, `${rows}.db`);
  runCli(['migrate'], { DATABASE_URL: `sqlite:${file}` });
  const db = new Database(file);
  const insert = db.prepare<[bigint, string]>('INSERT INTO plants (id, name) VALUES (?, ?)');
  const name = 'x'.repeat(256);
  db.transaction(() => {
    for (let k = 1; k <= rows; k += 1) insert.run(BigInt(k) * 1_000_003n, name);
  })();
  db.close();
  return file;
}

/** The largest V8 heap any process of one `plantstore export` committed, in MiB. */
function exportHeapMiB(file: string): number {
  const result = spawnSync(process.execPath, ['--import', PROBE, CLI, 'export', '--out', path.join(dir, 'out.jsonl')], {
    env: { ...process.env, DATABASE_URL: `sqlite:${file}`, NODE_OPTIONS: '' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(result.status, 0, result.stderr);
  const sizes = [...result.stderr.matchAll(/heap-probe heapTotalMiB=([0-9.]+)/g)].map((match) => Number(match[1]));
  assert.ok(sizes.length > 0, result.stderr);
  return Math.max(...sizes);
}

test('export keeps its heap bounded: four times the rows commit about the same heap', () => {
  const small = exportHeapMiB(database(20_000));
  const large = exportHeapMiB(database(80_000));
  // Left to itself V8 widens the young generation and lets the old one fill with garbage as rows stream through; the
  // CLI's bounded child keeps both near the live heap, whatever the row count.
  assert.ok(large < 48, `export of 80000 rows committed ${large} MiB of heap (20000 rows: ${small} MiB)`);
  assert.ok(large - small < 8, `heap grew from ${small} to ${large} MiB with four times the rows`);
});
