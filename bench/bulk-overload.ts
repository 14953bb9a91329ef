/**
 * `node dist/bench/bulk-overload.js [streams|blank|long|sigterm|all] [--record]`: streamed bulk creates under overload, against
 * a real `plantstore serve` in its default configuration on a fresh SQLite file (issue 37's bulk-stream figures):
 *
 *   streams  one stream of 50,000 lines alone, then 20 concurrent streams of 50,000 lines from one token, while
 *            another client sends a single create every 100 ms: lines refused, plants/s against the one stream's,
 *            the slowest single create, bytes of log, RSS growth.
 *   blank    one request of 10,000,000 blank lines: RSS growth.
 *   long     five requests of 1,000,000 lines, one after another, on a fresh server: RSS growth over each.
 *   sigterm  SIGTERM 2 s into a 2,000,000-line stream: exit code and time, the stream's last line, and whether every
 *            line answered 200 is stored.
 *
 * The client runs in this process, unpinned: on a shared machine the figures are noisy. Prints one line per figure.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config/config.js';
import { openStore } from '../src/storage/open.js';
import { openBulkCreate } from '../test/helpers/bulk.js';
import { sqliteDatabase } from '../test/helpers/databases.js';
import { createToken, startServer, type ServerProcess } from '../test/helpers/process.js';
import { procStatusKb } from './metrics.js';
import { plantstoreEnv } from './servers.js';
import { CLI } from './layout.js';
import { finishRecording, recordIfAsked, recording } from './recorder.js';

/** Every figure printed, kept for --record. */
const printed: string[] = [];
const log = (line: string) => {
  printed.push(line);
  process.stdout.write(`${line}\n`);
};
const rssMiB = (pid: number) => (procStatusKb(pid, 'VmRSS') ?? 0) / 1024;

interface StreamResult {
  readonly ok: number;
  readonly refused: number;
  readonly other: number;
  /** The last result line, as text. */
  readonly last: string;
  /** Line numbers answered 200 (only when asked for). */
  readonly okLines: number[];
}

/** Writes `lines` lines (from `text(index)`) as one NDJSON request, as fast as the server reads them. */
function stream(base: string, token: string, lines: number, text: (index: number) => string, options: { keepOkLines?: boolean; onResponse?: () => void } = {}): Promise<StreamResult> {
  return new Promise((resolve, reject) => {
    const request = openBulkCreate(base, token);
    let sent = 0;
    const more = () => {
      while (sent < lines) {
        let chunk = '';
        for (let i = 0; i < 1000 && sent < lines; i += 1, sent += 1) chunk += text(sent);
        if (!request.write(chunk)) return void request.once('drain', more);
      }
      request.end();
    };
    let answered = false;
    // A write can fail (EPIPE: the server stopped reading at a limit) with the answer still on its way, and Node's
    // client then often parses it all the same; one that never came is said so in `last` after a while, instead of
    // the bench waiting for it for ever.
    request.on('error', (error: NodeJS.ErrnoException) => {
      setTimeout(() => {
        if (!answered) resolve({ ok: 0, refused: 0, other: 0, last: `no answer (${error.code ?? error.message})`, okLines: [] });
      }, 5000).unref();
    });
    request.on('response', (response) => {
      answered = true;
      options.onResponse?.();
      let ok = 0;
      let refused = 0;
      let other = 0;
      let rest = '';
      let last = '';
      const okLines: number[] = [];
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        const all = rest + chunk;
        const end = all.lastIndexOf('\n');
        // No line ends in this chunk: all of it is the start of one (counted once it ends, not now as well).
        if (end < 0) {
          rest = all;
          return;
        }
        rest = all.slice(end + 1);
        for (const line of all.slice(0, end).split('\n')) {
          if (line === '') continue;
          last = line;
          const status = Number(/"status":(\d+)/.exec(line)?.[1]);
          if (status === 200) {
            ok += 1;
            if (options.keepOkLines) okLines.push(Number(/"line":(\d+)/.exec(line)?.[1]));
          } else if (status === 503) refused += 1;
          else other += 1;
        }
      });
      response.on('end', () => resolve({ ok, refused, other, last, okLines }));
      response.on('error', reject);
      response.on('aborted', () => resolve({ ok, refused, other, last, okLines }));
    });
    more();
  });
}

const plantLine = (first: number) => (index: number) => `{"id":${first + index},"name":"Monstera deliciosa","tag":"aroid"}\n`;

async function withServer<T>(env: Record<string, string>, run: (server: ServerProcess, token: string, logFile: string) => Promise<T>): Promise<T> {
  const db = await sqliteDatabase();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bulk-overload-'));
  const logFile = path.join(dir, 'server.log');
  const fd = fs.openSync(logFile, 'a');
  const serverEnv = { ...plantstoreEnv(db.url), ...env };
  const token = createToken('bulk-overload', serverEnv, CLI);
  const nodeArgs = (process.env.BULK_OVERLOAD_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  const server = await startServer(serverEnv, { nodeArgs: [...nodeArgs, CLI, 'serve'], stdio: ['ignore', fd, fd], startTimeoutMs: 60_000 });
  fs.closeSync(fd);
  try {
    return await run(server, token, logFile);
  } finally {
    await server.stop('SIGTERM', 20_000);
    await db.cleanup();
    if (process.env.BULK_OVERLOAD_KEEP_LOG) log(`server log kept: ${logFile}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Samples the server's RSS every 100 ms until stopped; resolves with the peak. */
function sampleRss(pid: number): { stop(): number } {
  let peak = rssMiB(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100);
  return {
    stop: () => {
      clearInterval(timer);
      return Math.max(peak, rssMiB(pid));
    },
  };
}

async function streams(): Promise<void> {
  const STREAMS = 20;
  const LINES = 50_000;
  await withServer({}, async (server, token, logFile) => {
    const pid = server.child.pid as number;
    let started = performance.now();
    const alone = await stream(server.base, token, LINES, plantLine(1));
    const aloneRate = alone.ok / ((performance.now() - started) / 1000);
    log(`one stream of ${LINES} lines alone: ${alone.ok} answered 200, ${alone.refused} 503, ${Math.round(aloneRate)} plants/s`);
    const logBefore = fs.statSync(logFile).size;
    const rssBefore = rssMiB(pid);
    const rss = sampleRss(pid);
    let slowest = 0;
    let singles = 0;
    let singlesFailed = 0;
    let running = true;
    let singleId = 1e12;
    const probe = (async () => {
      while (running) {
        const sentAt = performance.now();
        try {
          const response = await fetch(`${server.base}/plants`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', connection: 'close' },
            body: `{"id":${singleId++},"name":"single"}`,
            signal: AbortSignal.timeout(15_000),
          });
          await response.text();
          if (response.status !== 200) singlesFailed += 1;
        } catch {
          singlesFailed += 1;
        }
        singles += 1;
        slowest = Math.max(slowest, performance.now() - sentAt);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    started = performance.now();
    const results = await Promise.all(Array.from({ length: STREAMS }, (_, index) => stream(server.base, token, LINES, plantLine(1_000_000 + index * LINES))));
    const seconds = (performance.now() - started) / 1000;
    running = false;
    await probe;
    const peak = rss.stop();
    const ok = results.reduce((sum, result) => sum + result.ok, 0);
    const refused = results.reduce((sum, result) => sum + result.refused, 0);
    const other = results.reduce((sum, result) => sum + result.other, 0);
    const rate = ok / seconds;
    log(
      `${STREAMS} streams of ${LINES} lines: ${ok} answered 200, ${refused} 503, ${other} other in ${seconds.toFixed(1)} s: ${Math.round(rate)} plants/s ` +
        `(${(rate / aloneRate).toFixed(2)} of one stream alone); single creates: ${singles} sent, ${singlesFailed} not 200, slowest ${Math.round(slowest)} ms; ` +
        `log ${((fs.statSync(logFile).size - logBefore) / 1024).toFixed(1)} KiB; RSS ${rssBefore.toFixed(0)} -> peak ${peak.toFixed(0)} MiB (growth ${(peak - rssBefore).toFixed(0)} MiB)`,
    );
  });
}

async function blank(): Promise<void> {
  const LINES = 10_000_000;
  await withServer({}, async (server, token) => {
    const pid = server.child.pid as number;
    const before = rssMiB(pid);
    const rss = sampleRss(pid);
    const result = await stream(server.base, token, LINES, () => '\n');
    const peak = rss.stop();
    log(`one request of ${LINES} blank lines: last line ${result.last}; RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MiB (growth ${(peak - before).toFixed(0)} MiB)`);
  });
}

async function long(): Promise<void> {
  const LINES = 1_000_000;
  await withServer({}, async (server, token) => {
    const pid = server.child.pid as number;
    for (let run = 1; run <= 5; run += 1) {
      const before = rssMiB(pid);
      const rss = sampleRss(pid);
      const started = performance.now();
      const result = await stream(server.base, token, LINES, plantLine(run * 10_000_000));
      const peak = rss.stop();
      log(
        `request ${run} of ${LINES} lines: ${result.ok} answered 200 in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
          `RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MiB (growth ${(peak - before).toFixed(0)} MiB)`,
      );
    }
  });
}

async function sigterm(): Promise<void> {
  const LINES = 2_000_000;
  const db = await sqliteDatabase();
  const env = plantstoreEnv(db.url);
  const token = createToken('bulk-overload', env, CLI);
  const server = await startServer(env, { nodeArgs: [CLI, 'serve'], stdio: ['ignore', 'ignore', 'inherit'] });
  const shutdownMs = loadConfig({ LOG_LEVEL: 'silent' }).shutdownTimeoutMs;
  try {
    let signalledAt = 0;
    const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
    const result = await stream(server.base, token, LINES, plantLine(1), {
      keepOkLines: true,
      onResponse: () =>
        setTimeout(() => {
          signalledAt = performance.now();
          server.child.kill('SIGTERM');
        }, 2000),
    });
    const code = await exited;
    const exitMs = performance.now() - signalledAt;
    const store = await openStore(loadConfig({ DATABASE_URL: db.url, LOG_LEVEL: 'silent' }).database);
    let missing = 0;
    try {
      for (const line of result.okLines) if ((await store.plants.get(BigInt(line))) === undefined) missing += 1;
    } finally {
      await store.close();
    }
    log(
      `SIGTERM 2 s into a ${LINES}-line stream: exit ${code} after ${Math.round(exitMs)} ms (SHUTDOWN_TIMEOUT_MS ${shutdownMs}); ` +
        `${result.ok} answered 200, ${missing} of them not stored; last line ${result.last}`,
    );
  } finally {
    await server.kill();
    await db.cleanup();
  }
}

const SCENARIOS: Record<string, () => Promise<void>> = { streams, blank, long, sigterm };

async function main(): Promise<void> {
  await recordIfAsked('bulk-overload');
  const chosen = process.argv[2] ?? 'all';
  if (recording() && chosen !== 'all') throw new Error('--record runs every scenario: leave out the scenario name');
  for (const [name, run] of Object.entries(SCENARIOS)) if (chosen === 'all' || chosen === name) await run();
  const headline = printed.find((line) => /^\d+ streams of /.test(line)) ?? printed[0] ?? '';
  finishRecording({ headline, details: printed.filter((line) => line !== headline).map((line) => `- ${line}`), ratios: [] });
}

main().catch((error: unknown) => {
  process.stderr.write(`bulk-overload: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
