/**
 * `npm run bench:commits`: the ceiling of an instance's group commit (WORKERS > 1: one SQLite write connection), without HTTP. Feeder threads
 * stand in for worker threads: each hands batches of creates to the main thread exactly as a worker does (packed
 * by src/workers/wire.ts, one call over src/workers/rpc.ts, one batch in flight at a time), and the main thread runs
 * the instance's own WriteQueue on a SQLite store, merging the batches that arrive during a commit into the next.
 * For each batch size it reports creates/s, rows per commit, and the CPU of the main thread (the serial part:
 * decoding, the transaction, answering) and of the feeders (building plants, packing them, unpacking answers), then
 * fits the main thread's CPU per commit as a + b × rows. bench/workers-model.ts projects from these;
 * with one feeder, every commit holds one batch, so --handoff-only's fixed cost is the cost
 * of one worker batch on the main thread.
 *
 * --handoff-only answers every batch at once without storage: what the hand-off and merging cost by themselves.
 *
 *   node dist/bench/commit-ceiling.js [--seconds S] [--feeders K] [--sizes 1,5,25,100] [--db-dir DIR] [--handoff-only]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { SqliteStore } from '../src/storage/sqlite/sqlite-store.js';
import type { CreateOutcome, PlantStore } from '../src/storage/plant-store.js';
import type { Plant } from '../src/plant.js';
import { WriteQueue } from '../src/plants/write-queue.js';
import { round } from './metrics.js';
import type { MainOperations, WorkerOperations } from '../src/workers/protocol.js';
import { MAIN_OPERATION_CHECKS, WORKER_OPERATION_CHECKS } from '../src/workers/message-checks.js';
import { Endpoint } from '../src/workers/rpc.js';
import { packOutcomes, packPlants, unpackOutcomes, unpackPlants } from '../src/workers/wire.js';
import { finishRecording, recordIfAsked } from './recorder.js';

interface FeederData {
  readonly feeder: number;
  readonly batchSize: number;
  readonly seconds: number;
}

interface FeederResult {
  readonly rows: number;
  readonly batches: number;
  readonly cpuMicros: number;
}

const threadCpuMicros = () => {
  const usage = process.threadCpuUsage();
  return usage.user + usage.system;
};

/** A feeder thread: batches of fresh plants, one in flight, for `seconds`; then its counts. */
async function feed({ feeder, batchSize, seconds }: FeederData): Promise<void> {
  const port = parentPort!;
  const main = new Endpoint<MainOperations, WorkerOperations>(
    (message) => port.postMessage(message),
    {
      metrics: () => [],
      useCertificate: () => undefined,
      drain: () => undefined,
    },
    { outgoing: MAIN_OPERATION_CHECKS, incoming: WORKER_OPERATION_CHECKS },
  );
  port.on('message', (message: unknown) => main.receive(message));
  // Ids no other feeder or run sends: the feeder's number and the time in the high bits.
  let next = (BigInt(Date.now()) << 20n) + (BigInt(feeder) << 50n);
  const batch = (): Plant[] =>
    Array.from({ length: batchSize }, (_, index) => ({ id: next++, name: `plant ${index} of a feeder batch`, tag: index % 4 === 0 ? null : 'fern' }));
  let rows = 0;
  let batches = 0;
  let cpuMicros = 0;
  const deadline = performance.now() + seconds * 1000;
  const before = threadCpuMicros();
  while (performance.now() < deadline) {
    const plants = batch();
    const outcomes: CreateOutcome[] = unpackOutcomes(await main.call('create', packPlants(plants)));
    if (outcomes.length !== plants.length || outcomes.some((outcome) => outcome.kind !== 'created')) throw new Error('a feeder batch was not created whole');
    rows += plants.length;
    batches += 1;
  }
  // The thread's whole CPU, building the plants included (it stands for a worker parsing requests: a small part).
  cpuMicros = threadCpuMicros() - before;
  port.postMessage({ kind: 'done', rows, batches, cpuMicros } satisfies FeederResult & { kind: 'done' });
}

/** Answers every batch at once, storing nothing: the hand-off and the merging alone. */
const NOTHING: PlantStore = {
  create: (plants) => Promise.resolve(plants.map((): CreateOutcome => ({ kind: 'created' }))),
  get: () => Promise.resolve(undefined),
  list: () => Promise.resolve([]),
  delete: () => Promise.resolve(false),
};

interface Point {
  readonly batchSize: number;
  readonly createsPerSecond: number;
  readonly commitsPerSecond: number;
  readonly rowsPerCommit: number;
  /** Feeder batches merged into one commit, on average. */
  readonly batchesPerCommit: number;
  /** Main thread CPU per commit and per create, microseconds. */
  readonly mainMicrosPerCommit: number;
  readonly mainMicrosPerCreate: number;
  /** Wall time per commit the main thread was not on CPU (waiting for fsync, or for feeders), microseconds. */
  readonly mainIdleMicrosPerCommit: number;
  /** Feeder thread CPU per create (building plants, packing them, waiting, unpacking answers), microseconds. */
  readonly feederMicrosPerCreate: number;
}

async function measure(store: PlantStore, feeders: number, batchSize: number, seconds: number): Promise<Point> {
  let commits = 0;
  let committedRows = 0;
  const writer = new WriteQueue(store, {
    queueLimit: 10_000,
    concurrency: 1,
    batchLimit: 500,
    observer: {
      batchCommitted: (rows) => {
        commits += 1;
        committedRows += rows;
      },
    },
  });
  const started = performance.now();
  const cpuBefore = threadCpuMicros();
  const results = await Promise.all(
    Array.from({ length: feeders }, (_, feeder) => {
      const worker = new Worker(new URL(import.meta.url), { workerData: { feeder, batchSize, seconds } satisfies FeederData });
      const endpoint = new Endpoint<WorkerOperations, MainOperations>(
        (message) => worker.postMessage(message),
        {
          create: async (packed) => packOutcomes(await writer.createBatch(unpackPlants(packed), feeder + 1)),
          delete: () => false,
          recordTokenUse: () => undefined,
          checkWritable: () => undefined,
          metrics: () => '',
        },
        { outgoing: WORKER_OPERATION_CHECKS, incoming: MAIN_OPERATION_CHECKS },
      );
      return new Promise<FeederResult>((resolve, reject) => {
        worker.on('message', (message: unknown) => {
          if (endpoint.receive(message)) return;
          resolve(message as FeederResult);
          void worker.terminate();
        });
        worker.once('error', reject);
      });
    }),
  );
  const mainMicros = threadCpuMicros() - cpuBefore;
  const elapsedMicros = (performance.now() - started) * 1000;
  await writer.drain();
  const rows = results.reduce((sum, result) => sum + result.rows, 0);
  const feederMicros = results.reduce((sum, result) => sum + result.cpuMicros, 0);
  return {
    batchSize,
    createsPerSecond: Math.round(rows / (elapsedMicros / 1e6)),
    commitsPerSecond: Math.round(commits / (elapsedMicros / 1e6)),
    rowsPerCommit: round(committedRows / commits),
    batchesPerCommit: round(results.reduce((sum, result) => sum + result.batches, 0) / commits, 2),
    mainMicrosPerCommit: round(mainMicros / commits),
    mainMicrosPerCreate: round(mainMicros / committedRows, 2),
    mainIdleMicrosPerCommit: round((elapsedMicros - mainMicros) / commits),
    feederMicrosPerCreate: round(feederMicros / rows, 2),
  };
}

/** Least squares of main CPU per commit over rows per commit: the serial cost per commit (a) and per row (b). */
function fit(points: readonly Point[]): { perCommitMicros: number; perRowMicros: number } {
  const n = points.length;
  const xs = points.map((point) => point.rowsPerCommit);
  const ys = points.map((point) => point.mainMicrosPerCommit);
  const meanX = xs.reduce((a, b) => a + b, 0) / n;
  const meanY = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let index = 0; index < n; index += 1) {
    sxy += ((xs[index] as number) - meanX) * ((ys[index] as number) - meanY);
    sxx += ((xs[index] as number) - meanX) ** 2;
  }
  const perRowMicros = sxx === 0 ? 0 : sxy / sxx;
  return { perCommitMicros: Math.round((meanY - perRowMicros * meanX) * 10) / 10, perRowMicros: Math.round(perRowMicros * 100) / 100 };
}

async function main(): Promise<void> {
  await recordIfAsked('commit-ceiling');
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '3' },
      feeders: { type: 'string', default: '2' },
      sizes: { type: 'string', default: '1,5,25,100,250' },
      'db-dir': { type: 'string', default: os.tmpdir() },
      'handoff-only': { type: 'boolean', default: false },
    },
  });
  const seconds = Number(values.seconds);
  const feeders = Number(values.feeders);
  const sizes = values.sizes.split(',').map(Number);
  const handoffOnly = values['handoff-only'];
  const dir = fs.mkdtempSync(path.join(values['db-dir'], 'plantstore-writer-'));
  const store = handoffOnly ? undefined : SqliteStore.open(path.join(dir, 'plants.db'));
  try {
    process.stderr.write(
      `writer ceiling: ${feeders} feeder thread(s), ${seconds} s per batch size, ${handoffOnly ? 'no storage (--handoff-only)' : `SQLite in ${dir}`}; Node ${process.version}, ${os.availableParallelism()} CPUs, load average ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}\n`,
    );
    const points: Point[] = [];
    for (const batchSize of sizes) {
      const point = await measure(store?.plants ?? NOTHING, feeders, batchSize, seconds);
      points.push(point);
      process.stderr.write(`  ${JSON.stringify(point)}\n`);
    }
    const header = Object.keys(points[0] as Point);
    const lines = [
      `| ${header.join(' | ')} |`,
      `| ${header.map(() => '---:').join(' | ')} |`,
      ...points.map((point) => `| ${header.map((key) => String(point[key as keyof Point])).join(' | ')} |`),
      '',
      `main thread CPU per commit ≈ ${fit(points).perCommitMicros} µs + ${fit(points).perRowMicros} µs × rows (least squares over the sizes above); ` +
        `load average at end ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    await store?.close();
    finishRecording({ headline: `main thread CPU per commit ≈ ${fit(points).perCommitMicros} µs + ${fit(points).perRowMicros} µs × rows`, details: lines.slice(0, -2), ratios: [] });
  } finally {
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (isMainThread) {
  await main();
} else {
  await feed(workerData as FeederData);
}
