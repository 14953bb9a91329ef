import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import { plantJson } from '../../src/json/plant-json.js';
import type { Plant } from '../../src/plant.js';
import { prepareValue } from '../../src/storage/sqlite/connection.js';
import { startTestApp } from '../helpers/app.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { CLI } from '../helpers/process.js';
import { numberedPlants, plantstore, sqliteFile, storePlants } from '../helpers/transfer.js';

/** Plants that test exactness: int64 ends, ids a double cannot hold, unicode of every kind, tags absent, present, empty. */
const TRICKY: readonly Plant[] = [
  { id: INT64_MIN, name: 'the smallest', tag: null },
  { id: -9007199254740993n, name: 'minus 2^53 - 1', tag: '' },
  { id: -1n, name: 'Monstera 🌿 deliciosa', tag: 'aroid' },
  { id: 0n, name: '日本語の名前', tag: 'ｔａｇ' },
  { id: 9007199254740992n, name: 'e\u0301 combining, \u202eright to left', tag: null },
  { id: 9007199254740993n, name: 'quotes " and \\ backslash, tab\tand \u0001 control, \u2028 separator', tag: '\\"' },
  { id: INT64_MAX - 1n, name: '🌵'.repeat(256), tag: '🌸'.repeat(64) },
  { id: INT64_MAX, name: 'the largest', tag: '' },
];

function exportOf(env: Record<string, string>, args: string[] = []): string {
  const result = plantstore(['export', ...args], env);
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
}

const ESC = '\u001b';

/** `line N: reason` lines of an import's stderr, by line number. */
function problemsOf(stderr: string): Map<number, string> {
  const problems = new Map<number, string>();
  for (const match of stderr.matchAll(/^line (\d+): (.*)$/gm)) problems.set(Number(match[1]), match[2] as string);
  return problems;
}

describe('plantstore export and import', () => {
  let source: TestDatabase;
  let target: TestDatabase;
  let dir: string;

  before(async () => {
    source = await sqliteDatabase();
    target = await sqliteDatabase();
    dir = path.dirname(sqliteFile(source.url));
    await storePlants(source.url, TRICKY);
  });
  after(async () => {
    await source?.cleanup();
    await target?.cleanup();
  });

  it('exports every plant as exact JSON lines in id order, and an import of that output round-trips exactly', () => {
    const expected = [...TRICKY].sort((a, b) => (a.id < b.id ? -1 : 1)).map((plant) => `${plantJson(plant)}\n`).join('');
    const text = exportOf({ DATABASE_URL: source.url });
    assert.equal(text, expected);
    assert.match(text, /^\{"id":-9223372036854775808,"name":"the smallest"\}$/m, 'no tag when there is none');
    assert.match(text, /^\{"id":9223372036854775807,"name":"the largest","tag":""\}$/m, 'an empty tag is kept');
    assert.match(text, /"id":9007199254740993,/, 'ids past 2^53 exact');

    const imported = plantstore(['import'], { DATABASE_URL: target.url }, text);
    assert.equal(imported.status, 0, imported.stderr);
    assert.equal(imported.stdout, '');
    // The target did not exist: import says it made it, before its summary.
    assert.ok(imported.stderr.startsWith(`created a new database at ${target.url.slice('sqlite:'.length)}\n`), imported.stderr);
    assert.match(imported.stderr, new RegExp(`\\nimport: ${TRICKY.length} lines: ${TRICKY.length} created, 0 identical \\(skipped\\), 0 conflicting, 0 invalid, 0 blank \\(skipped\\)\\n$`));
    assert.equal(exportOf({ DATABASE_URL: target.url }), text);

    // The same again: every plant is there identically, so nothing is written and nothing is wrong.
    const again = plantstore(['import'], { DATABASE_URL: target.url }, text);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, /0 created, 8 identical \(skipped\), 0 conflicting/);
  });

  it('export --tag exports only plants tagged exactly T, and an empty --tag only the empty tag', () => {
    assert.equal(exportOf({ DATABASE_URL: source.url }, ['--tag', 'aroid']), '{"id":-1,"name":"Monstera 🌿 deliciosa","tag":"aroid"}\n');
    const empty = exportOf({ DATABASE_URL: source.url }, ['--tag', '']).trim().split('\n');
    assert.deepEqual(empty.map((line) => (JSON.parse(line) as { tag: string }).tag), ['', '']);
  });

  it('export --out writes the file whole under its name (0600), replacing what was there, and leaves nothing partial', () => {
    const file = path.join(dir, 'plants.jsonl');
    fs.writeFileSync(file, 'old content\n');
    const result = plantstore(['export', '--out', file], { DATABASE_URL: source.url });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /exported 8 plants to .*plants\.jsonl/);
    assert.equal(fs.readFileSync(file, 'utf8'), exportOf({ DATABASE_URL: source.url }));
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.deepEqual(fs.readdirSync(dir).filter((name) => name.includes('.partial-')), []);
    // A file that cannot be written fails, exit 1, and the old file stays.
    const nowhere = plantstore(['export', '--out', path.join(dir, 'no-such-folder', 'x.jsonl')], { DATABASE_URL: source.url });
    assert.equal(nowhere.status, 1);
    assert.equal(
      nowhere.stderr,
      `plantstore: export --out ${path.join(dir, 'no-such-folder', 'x.jsonl')}: the folder ${path.join(dir, 'no-such-folder')} does not exist; ` +
        `create it first (mkdir -p '${path.join(dir, 'no-such-folder')}') or name a file in a folder that exists\n`,
    );
  });

  it('export streams a large table page by page, and stops quietly when its reader stops early', async () => {
    const big = await sqliteDatabase();
    try {
      await storePlants(big.url, numberedPlants(30_000, -15_000n));
      const text = exportOf({ DATABASE_URL: big.url });
      const lines = text.trimEnd().split('\n');
      assert.equal(lines.length, 30_000);
      assert.equal(lines[0], '{"id":-15000,"name":"plant -15000"}');
      assert.equal(lines.at(-1), '{"id":14999,"name":"plant 14999","tag":"tag4"}');

      // `plantstore export | head -n 1` (and `plants list | head -n 1`): the reader goes away after one line.
      for (const args of [['export'], ['plants', 'list']]) {
        const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, DATABASE_URL: big.url }, stdio: ['ignore', 'pipe', 'pipe'] });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        const first = await new Promise<string>((resolve) => child.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString())));
        child.stdout.destroy();
        const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
        assert.match(first, /^\{"id":-15000,/);
        assert.equal(code, 0, `${args.join(' ')}: ${stderr}`);
        assert.equal(stderr, '');
      }
    } finally {
      await big.cleanup();
    }
  });

  it('validates every line exactly as POST /plants validates a body: the same refusals, the same words, the same plants stored', async () => {
    const limits = { NAME_MAX_LENGTH: '8', TAG_MAX_LENGTH: '4', BODY_LIMIT_BYTES: '256' };
    const lines: Array<string | Buffer> = [
      '{"id":1,"name":"Fern"}',
      '{"id":2,"name":"Ivy","tag":"vine"}',
      '{"id":12.0,"name":"twelve"}',
      '{"id":1.2e1,"name":"twelve"}',
      '{"id":1,"name":"Fern2"}',
      '{"id":9223372036854775807,"name":"max"}',
      '{"id":9223372036854775808,"name":"over"}',
      '{"id":-9223372036854775809,"name":"under"}',
      '{"id":1e400,"name":"huge"}',
      '{"id":1.5,"name":"half"}',
      '{"id":"5","name":"string id"}',
      '{"name":"no id"}',
      '{"id":6}',
      '{"id":7,"name":""}',
      '{"id":8,"name":"123456789"}',
      '{"id":9,"name":"ok","tag":"12345"}',
      '{"id":10,"name":"ok","tag":null}',
      '{"id":11,"name":"a\\u0000b"}',
      '{"id":12,"name":"x","color":"red"}',
      '{"id":13,"name":"a","name":"b"}',
      '{"id":14,"name":"a","n\\u0061me":"b"}',
      '{"id":15,"name":"\\ud800"}',
      Buffer.concat([Buffer.from('{"id":16,"name":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
      '[{"id":17,"name":"in an array"}]',
      '17',
      'null',
      '{"id":18,"name":"unterminated"',
      `{"id":19,"name":${'['.repeat(20)}${']'.repeat(20)}}`,
      '{"id":20,"name":"🌵🌵🌵🌵🌵🌵🌵🌵"}',
      '{"id":21,"name":"🌵🌵🌵🌵🌵🌵🌵🌵🌵"}',
      '\uFEFF{"id":22,"name":"bom"}',
      `{"id":23,"name":"long","pad":"${'x'.repeat(300)}"}`,
      '{"id":24,"name":"crlf"}\r',
      '{"id":25,"name":"__proto__","__proto__":{"polluted":true}}',
    ];

    // Through the HTTP API, one request per line.
    const viaHttp = await sqliteDatabase();
    const app = await startTestApp(viaHttp.url, limits);
    const answers: Array<{ status: number; message?: string }> = [];
    try {
      for (const line of lines) {
        const response = await app.app.inject({ method: 'POST', url: '/plants', headers: app.headers, payload: line });
        answers.push({ status: response.statusCode, ...(response.statusCode === 200 ? {} : { message: (response.json() as { message: string }).message }) });
      }
    } finally {
      await app.close();
    }

    // Through import, the same lines as one file.
    const viaImport = await sqliteDatabase();
    try {
      const file = path.join(path.dirname(sqliteFile(viaImport.url)), 'lines.jsonl');
      fs.writeFileSync(file, Buffer.concat(lines.map((line) => Buffer.concat([Buffer.from(line), Buffer.from('\n')]))));
      const result = plantstore(['import', file], { DATABASE_URL: viaImport.url, ...limits });
      assert.equal(result.status, 1, 'some lines were refused');
      const problems = problemsOf(result.stderr);
      answers.forEach((answer, index) => {
        const problem = problems.get(index + 1);
        const line = String(lines[index]);
        if (answer.status === 200) {
          assert.equal(problem, undefined, `line ${index + 1} (${line}) is accepted by POST /plants`);
          return;
        }
        assert.ok(problem !== undefined, `line ${index + 1} (${line}) is refused by POST /plants with ${answer.status} ${answer.message}`);
        if (answer.status === 413) {
          assert.equal(problem, 'plant is longer than the limit of 256 bytes (BODY_LIMIT_BYTES)');
          assert.equal(answer.message, 'request body is larger than the limit of 256 bytes');
        } else {
          // The same message: a field named as the API names it (body.name), the text as a whole named the plant where
          // the API names the request body.
          assert.equal(problem, (answer.message as string).replace(/^request body\b/, 'plant').replace(/^body(?= )/, 'plant'), line);
        }
      });
      assert.equal(problems.size, answers.filter((answer) => answer.status !== 200).length);
      assert.equal(answers.filter((answer) => answer.status === 200).length, 7, 'the cases cover acceptance too');
      // What was stored is the same, plant for plant.
      assert.equal(exportOf({ DATABASE_URL: viaImport.url }), exportOf({ DATABASE_URL: viaHttp.url }));
      assert.match(result.stderr, /^import: 34 lines: 6 created, 1 identical \(skipped\), 1 conflicting, 26 invalid, 0 blank \(skipped\)$/m);
      assert.equal(problems.get(5), 'a plant with id 1 already exists with a different name or tag');
      assert.equal(problems.get(13), "plant is missing required property 'name'");
      assert.ok([...problems.values()].includes('body.name must not be empty'), 'a field is spelled as a single create spells it');
    } finally {
      await viaHttp.cleanup();
      await viaImport.cleanup();
    }
  });

  it('skips blank lines, reads standard input, and reports each bad line with its number without writing any of it', async () => {
    const db = await sqliteDatabase();
    try {
      const env = { DATABASE_URL: db.url };
      const input = ['{"id":1,"name":"one"}', '', '   \t', '{"id":2,"name":"two","tag":"t"}', '{"id":3,"name":"three","extra":1}', '{"id":1,"name":"other"}', '{"id":4,"name":"four"}'].join('\n');
      const result = plantstore(['import'], env, input);
      assert.equal(result.status, 1);
      assert.deepEqual([...problemsOf(result.stderr)], [
        [5, "plant has unknown property 'extra'"],
        [6, 'a plant with id 1 already exists with a different name or tag'],
      ]);
      assert.match(result.stderr, /import: 7 lines: 3 created, 0 identical \(skipped\), 1 conflicting, 1 invalid, 2 blank \(skipped\)/);
      // Nothing of a refused line is stored, and the conflicting line left the stored plant as it was.
      assert.equal(exportOf(env), '{"id":1,"name":"one"}\n{"id":2,"name":"two","tag":"t"}\n{"id":4,"name":"four"}\n');
      // `-` is standard input too; a file that is not there is a failure.
      assert.equal(plantstore(['import', '-'], env, '{"id":4,"name":"four"}\n').status, 0);
      const none = path.join(path.dirname(sqliteFile(db.url)), 'none.jsonl');
      const missing = plantstore(['import', none], env);
      assert.equal(missing.status, 1);
      assert.equal(missing.stderr, `plantstore: import FILE ${none}: there is no such file; name a file of NewPlant JSON lines, or - for standard input\n`);
      assert.equal(plantstore(['import', 'a', 'b'], env).status, 2);
    } finally {
      await db.cleanup();
    }
  });

  it('--dry-run reports what an import would do, the same problems, and writes nothing', async () => {
    const db = await sqliteDatabase();
    try {
      const env = { DATABASE_URL: db.url };
      assert.equal(plantstore(['import'], env, '{"id":1,"name":"one"}\n').status, 0);
      const file = sqliteFile(db.url);
      const sizeBefore = fs.statSync(file).size;
      const before = exportOf(env);
      const input = '{"id":1,"name":"one"}\n{"id":1,"name":"changed"}\n{"id":2,"name":"new"}\n{"id":3}\n';
      const result = plantstore(['import', '--dry-run'], env, input);
      assert.equal(result.status, 1);
      assert.deepEqual([...problemsOf(result.stderr)], [
        [2, 'a plant with id 1 already exists with a different name or tag'],
        [4, "plant is missing required property 'name'"],
      ]);
      assert.match(result.stderr, /import --dry-run: 4 lines: 1 to create, 1 identical \(skipped\), 1 conflicting, 1 invalid, 0 blank \(skipped\); nothing was written/);
      assert.equal(exportOf(env), before);
      assert.equal(fs.statSync(file).size, sizeBefore);
      const clean = plantstore(['import', '--dry-run'], env, '{"id":2,"name":"new"}\n');
      assert.equal(clean.status, 0, 'a clean dry run exits 0');
      assert.equal(exportOf(env), before);
    } finally {
      await db.cleanup();
    }
  });

  it('bounds a huge line by BODY_LIMIT_BYTES and goes on with the next one', async () => {
    const db = await sqliteDatabase();
    try {
      const env = { DATABASE_URL: db.url, BODY_LIMIT_BYTES: '1024' };
      const huge = `{"id":1,"name":"${'x'.repeat(8 * 1024 * 1024)}"}`;
      const result = plantstore(['import'], env, `${huge}\n{"id":2,"name":"after"}\n${'y'.repeat(1025)}`);
      assert.equal(result.status, 1);
      assert.deepEqual([...problemsOf(result.stderr)], [
        [1, 'plant is longer than the limit of 1024 bytes (BODY_LIMIT_BYTES)'],
        [3, 'plant is longer than the limit of 1024 bytes (BODY_LIMIT_BYTES)'],
      ]);
      assert.equal(exportOf(env), '{"id":2,"name":"after"}\n');
    } finally {
      await db.cleanup();
    }
  });

  it('stops when storage refuses a batch, saying which lines are committed, and the same import run again finishes', async () => {
    const db = await sqliteDatabase();
    try {
      const env = { DATABASE_URL: db.url, WRITE_BATCH_LIMIT: '2' };
      const lines = Array.from({ length: 5 }, (_, index) => `{"id":${index + 1},"name":"p${index + 1}"}\n`);
      const child = spawn(process.execPath, [CLI, 'import'], { env: { ...process.env, ...env }, stdio: ['pipe', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const closed = new Promise<number | null>((resolve) => child.once('close', (status) => resolve(status)));
      // The first batch (lines 1 and 2) is committed; then another process holds the write lock past the busy timeout.
      child.stdin.write(lines[0]);
      child.stdin.write(lines[1]);
      const file = sqliteFile(db.url);
      const count = () => {
        if (!fs.existsSync(file)) return 0;
        const reader = new DatabaseSync(file, { readOnly: true });
        try {
          return prepareValue<[], number>(reader, 'SELECT count(*) FROM plants').get() as number;
        } catch {
          return 0;
        } finally {
          reader.close();
        }
      };
      while (count() < 2) await new Promise((resolve) => setTimeout(resolve, 20));
      const locker = new DatabaseSync(file);
      let status: number | null;
      try {
        locker.exec('BEGIN IMMEDIATE');
        child.stdin.end(lines.slice(2).join(''));
        status = await closed;
      } finally {
        if (locker.isTransaction) locker.exec('ROLLBACK');
        locker.close();
      }
      assert.equal(status, 1);
      assert.match(stderr, /import stopped at line 3: .*every plant before that line is committed, and running the same import again finishes the job/);
      assert.equal(count(), 2);
      const again = plantstore(['import'], env, lines.join(''));
      assert.equal(again.status, 0, again.stderr);
      assert.match(again.stderr, /5 lines: 3 created, 2 identical/);
    } finally {
      await db.cleanup();
    }
  });

  it('draws a progress line on stderr only when stderr is a terminal', (context) => {
    const db = path.join(dir, 'progress.db');
    const input = path.join(dir, 'progress.jsonl');
    fs.writeFileSync(input, '{"id":1,"name":"one"}\n{"id":2}\n');
    const plain = plantstore(['import', input], { DATABASE_URL: `sqlite:${db}` });
    assert.ok(!plain.stderr.includes('\r') && !plain.stderr.includes(ESC), 'no terminal control characters in a file or pipe');
    assert.match(plain.stderr, /^created a new database at .*\nline 2: .*\nimport: 2 lines: 1 created/);
    // `script` runs the command on a pseudo-terminal.
    if (spawnSync('script', ['--version']).error) {
      context.skip('no `script` command to give the import a terminal');
      return;
    }
    const command = `DATABASE_URL=sqlite:${db}2 ${process.execPath} ${CLI} import ${input}`;
    const tty = spawnSync('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', timeout: 60_000 });
    assert.match(tty.stdout, /line 2: plant is missing required property 'name'/);
    const status = 'import: 2 lines: 1 created, 0 identical (skipped), 0 conflicting, 1 invalid, 0 blank (skipped)';
    assert.ok(tty.stdout.includes(`\r${status}${ESC}[K`), `a status line drawn in place: ${JSON.stringify(tty.stdout)}`);
    assert.ok(tty.stdout.includes(`${ESC}[K\r${ESC}[K${status}\r\n`), 'and cleared before the summary');
  });
});
