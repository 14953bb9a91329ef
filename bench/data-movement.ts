/**
 * Data movement at scale: `npm run build && node dist/bench/data-movement.js --rows N [--ids spread|sequential]`.
 *
 * Builds a SQLite database of N plants (directly, like bench/prefill.ts, on a schema made by `plantstore migrate`),
 * then runs the real CLI, each command under `/usr/bin/time -v` for its wall time and peak RSS (VmHWM):
 *   export --out FILE          (SQLite → JSON lines)
 *   import FILE                (JSON lines → a fresh SQLite database)
 *   copy --to postgres://…     (SQLite → a fresh database on an embedded PostgreSQL server of its own)
 * and checks each result (the import's export is byte-identical to the export; copy says verified). Prints a
 * markdown table. `--ids spread` (the default) gives 19-digit ids across int64, so every line takes the exact int64
 * parser on import; `sequential` gives 1..N, which JSON.parse reads.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DatabaseSync } from 'node:sqlite';
import { prepareWrite, transaction } from '../src/storage/sqlite/connection.js';
import { createDatabase, TestPostgres } from '../test/helpers/postgres.js';
import { cliOf } from './layout.js';
import { finishRecording, recordIfAsked, type RunFigures } from './recorder.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = cliOf(root);
await recordIfAsked('data-movement');
const { values } = parseArgs({ options: { rows: { type: 'string', default: '1000000' }, ids: { type: 'string', default: 'spread' } } });
const rows = Number(values.rows);
const ids = values.ids;
if (!Number.isSafeInteger(rows) || rows < 1 || (ids !== 'spread' && ids !== 'sequential')) {
  process.stderr.write('usage: data-movement.js --rows N --ids spread|sequential\n');
  process.exit(2);
}

const NAMES = ['Monstera deliciosa', 'Ficus lyrata', 'Pilea peperomioides', 'Calathea orbifolia'];
const TAGS = ['aroid', 'fig', 'pilea', null];
/** Ids spread over int64: step × k for k around zero, so both signs and 19 digits. */
const STEP = (2n ** 63n - 1n) / BigInt(rows);

function idOf(k: number): bigint {
  return ids === 'sequential' ? BigInt(k + 1) : (BigInt(k) - BigInt(Math.floor(rows / 2))) * STEP;
}

interface Measured {
  readonly command: string;
  readonly seconds: number;
  readonly peakRssMiB: number;
  readonly cpuSeconds: number;
  readonly stderr: string;
}

/** Runs the CLI under /usr/bin/time -v and reads wall time, CPU time and maximum RSS from its report. */
function measure(args: string[], env: Record<string, string>): Measured {
  const result = spawnSync('/usr/bin/time', ['-v', process.execPath, cli, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const report = result.stderr;
  if (result.status !== 0) throw new Error(`plantstore ${args.join(' ')} exited ${result.status}: ${report}`);
  const field = (name: string) => {
    const line = report.split('\n').find((candidate) => candidate.trim().startsWith(name));
    if (!line) throw new Error(`no "${name}" in: ${report}`);
    return line.slice(line.lastIndexOf(': ') + 2).trim();
  };
  const wall = field('Elapsed (wall clock) time').split(':').map(Number);
  const seconds = wall.reduce((total, part) => total * 60 + part, 0);
  return {
    command: `plantstore ${args.join(' ')}`,
    seconds,
    peakRssMiB: Number(field('Maximum resident set size (kbytes)')) / 1024,
    cpuSeconds: Number(field('User time (seconds)')) + Number(field('System time (seconds)')),
    stderr: report.slice(0, report.indexOf('\tCommand being timed')),
  };
}

function sha256(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-data-movement-'));
const log = (line: string) => process.stderr.write(`${line}\n`);
let postgres: TestPostgres | undefined;
let figures: RunFigures | undefined;
try {
  const source = path.join(dir, 'source.db');
  const migrated = spawnSync(process.execPath, [cli, 'migrate'], { env: { ...process.env, DATABASE_URL: `sqlite:${source}` }, encoding: 'utf8' });
  if (migrated.status !== 0) throw new Error(migrated.stderr);
  const db = new DatabaseSync(source);
  db.exec('PRAGMA journal_mode = OFF');
  db.exec('PRAGMA synchronous = OFF');
  const insert = prepareWrite<[bigint, string, string | null]>(db, 'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)');
  transaction(db, () => {
    for (let k = 0; k < rows; k += 1) insert.run(idOf(k), NAMES[k % 4] as string, TAGS[k % 4] ?? null);
  });
  db.exec('PRAGMA journal_mode = WAL');
  db.close();
  log(`${rows} plants (${ids} ids) in ${source}`);
  const sourceEnv = { DATABASE_URL: `sqlite:${source}` };

  const exportFile = path.join(dir, 'plants.jsonl');
  const exported = measure(['export', '--out', exportFile], sourceEnv);
  log(`export: ${exported.seconds} s`);

  const imported = path.join(dir, 'imported.db');
  const importedEnv = { DATABASE_URL: `sqlite:${imported}` };
  const importRun = measure(['import', exportFile], importedEnv);
  log(`import: ${importRun.seconds} s`);
  const check = path.join(dir, 'check.jsonl');
  const reexport = spawnSync(process.execPath, [cli, 'export', '--out', check], { env: { ...process.env, ...importedEnv }, encoding: 'utf8' });
  if (reexport.status !== 0 || sha256(check) !== sha256(exportFile)) throw new Error('the imported database does not export the same bytes');

  postgres = await TestPostgres.start();
  const target = await createDatabase(postgres.url());
  const copied = measure(['copy', '--to', target.url], sourceEnv);
  if (!/copy: verified/.test(copied.stderr)) throw new Error(`copy did not verify: ${copied.stderr}`);
  log(`copy: ${copied.seconds} s`);

  const bytes = fs.statSync(exportFile).size;
  process.stdout.write(`\n${rows} plants, ${ids} ids; export file ${(bytes / 1e6).toFixed(1)} MB; load average at the end ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}\n\n`);
  const table = ['| command | wall s | rows/s | CPU s | peak RSS MiB |', '| --- | ---: | ---: | ---: | ---: |'];
  for (const run of [exported, importRun, copied]) {
    const command = run.command.replace(dir, '$DIR').replace(target.url, 'postgres://…');
    table.push(
      `| \`${command.replaceAll(dir, '$DIR')}\` | ${run.seconds.toFixed(1)} | ${Math.round(rows / run.seconds).toLocaleString('en-US')} | ${run.cpuSeconds.toFixed(1)} | ${run.peakRssMiB.toFixed(0)} |`,
    );
  }
  process.stdout.write(`${table.join('\n')}\n`);
  const peak = Math.max(exported.peakRssMiB, importRun.peakRssMiB, copied.peakRssMiB);
  figures = { headline: `peak RSS at most ${peak.toFixed(0)} MiB over ${rows.toLocaleString('en-US')} plants (${ids} ids)`, details: table, ratios: [] };
} finally {
  await postgres?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
if (figures) finishRecording(figures);
