/**
 * `node dist/bench/workers-model.js --worker-cpu µs --per-commit µs --per-batch µs --per-row µs --commit-wait µs
 * [--batch-limit N] [--cores 2,4,8,16] [--svg FILE]`: durable creates/s an instance of WORKERS = cores could reach on SQLite, projected
 * from measured parts (`npm run bench:commits` and `npm run bench -- --workers`), with the load generated on other machines:
 *
 *   --worker-cpu   CPU per create in a worker thread: HTTP, validation, its side of the hand-off (bench --workers:
 *                  the process's CPU per create less the main thread's)
 *   --per-commit   the main thread's CPU per commit that grows neither with its rows nor with its batches: the
 *                  transaction, the fsync's kernel time
 *   --per-batch    the main thread's CPU per worker batch it merges: receiving the message, answering it (bench:commits
 *                  --handoff-only's fit per commit, at one batch per commit)
 *   --per-row      the main thread's CPU per row: SQLite's insert and the row's share of decoding and answering
 *   --commit-wait  wall time per commit the main thread waits off-CPU: the fsync (bench:commits: mainIdleMicrosPerCommit
 *                  at the largest batches)
 *
 * The one writer commits back to back once busy, each commit holding every row that arrived during the previous one,
 * up to WRITE_BATCH_LIMIT, in one batch from each of the C workers; its CPU per commit is a = per-commit + C ×
 * per-batch. Two limits follow:
 *   - the writer's: commits of batch-limit rows back to back, R / (a + F + b·R) creates per µs;
 *   - the cores': C cores run the workers' CPU per create plus the main thread's; with commits back to back the main
 *     thread spends a / (a + F) of a core on per-commit work whatever the load, and b per row, so
 *     X · (c_w + b·F / (a + F)) = 10^6 · (C − a / (a + F)).
 * The projection is the lower of the two.
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { renderBarChart } from './chart.js';

interface WorkerModelInputs {
  readonly workerMicrosPerCreate: number;
  readonly mainMicrosPerCommit: number;
  readonly mainMicrosPerBatch: number;
  readonly mainMicrosPerRow: number;
  readonly commitWaitMicros: number;
  readonly batchLimit: number;
}

interface Projection {
  readonly cores: number;
  /** Creates/s the cores allow, the writer aside. */
  readonly coresLimit: number;
  /** Creates/s the one writer allows at the batch limit. */
  readonly writerLimit: number;
  readonly projected: number;
  readonly limitedBy: 'cores' | 'writer';
}

function project(inputs: WorkerModelInputs, cores: number): Projection {
  const { workerMicrosPerCreate: cw, mainMicrosPerRow: b, commitWaitMicros: f, batchLimit: r } = inputs;
  const a = inputs.mainMicrosPerCommit + cores * inputs.mainMicrosPerBatch;
  const writerLimit = (1e6 * r) / (a + f + b * r);
  const busyShare = a / (a + f);
  const coresLimit = Math.max(0, (1e6 * (cores - busyShare)) / (cw + (b * f) / (a + f)));
  const projected = Math.min(coresLimit, writerLimit);
  return { cores, coresLimit: Math.round(coresLimit), writerLimit: Math.round(writerLimit), projected: Math.round(projected), limitedBy: coresLimit <= writerLimit ? 'cores' : 'writer' };
}

function main(): void {
  const { values } = parseArgs({
    options: {
      'worker-cpu': { type: 'string' },
      'per-commit': { type: 'string' },
      'per-batch': { type: 'string' },
      'per-row': { type: 'string' },
      'commit-wait': { type: 'string' },
      'batch-limit': { type: 'string', default: '500' },
      cores: { type: 'string', default: '2,4,8,16' },
      svg: { type: 'string' },
    },
  });
  const number = (name: keyof typeof values) => {
    const value = Number(values[name]);
    if (values[name] === undefined || !Number.isFinite(value) || value < 0) throw new Error(`--${name} takes a number (microseconds), got ${JSON.stringify(values[name])}`);
    return value;
  };
  const inputs: WorkerModelInputs = {
    workerMicrosPerCreate: number('worker-cpu'),
    mainMicrosPerCommit: number('per-commit'),
    mainMicrosPerBatch: number('per-batch'),
    mainMicrosPerRow: number('per-row'),
    commitWaitMicros: number('commit-wait'),
    batchLimit: number('batch-limit'),
  };
  const projections = (values.cores ?? '').split(',').map(Number).map((cores) => project(inputs, cores));
  const lines = [
    `Inputs: ${inputs.workerMicrosPerCreate} µs per create in a worker; main thread ${inputs.mainMicrosPerCommit} µs per commit + ${inputs.mainMicrosPerBatch} µs per worker batch + ${inputs.mainMicrosPerRow} µs per row, ${inputs.commitWaitMicros} µs waiting per commit; batches of at most ${inputs.batchLimit} rows`,
    '',
    '| cores (= WORKERS) | cores allow, creates/s | the writer allows, creates/s | projected | limited by |',
    '| ---: | ---: | ---: | ---: | --- |',
    ...projections.map((p) => `| ${p.cores} | ${p.coresLimit} | ${p.writerLimit} | **${p.projected}** | ${p.limitedBy} |`),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (values.svg) {
    fs.writeFileSync(
      values.svg,
      renderBarChart({
        title: 'Durable creates/s on SQLite by cores (WORKERS = cores), projected',
        subtitle: `worker ${inputs.workerMicrosPerCreate} µs/create; writer ${inputs.mainMicrosPerCommit} µs/commit + ${inputs.mainMicrosPerBatch} µs/batch + ${inputs.mainMicrosPerRow} µs/row, ${inputs.commitWaitMicros} µs fsync wait`,
        unit: 'creates/s',
        groups: projections.map((p) => ({
          label: `${p.cores} cores`,
          bars: [
            { series: 'cores allow', value: p.coresLimit },
            { series: 'the writer allows', value: p.writerLimit },
          ],
        })),
      }),
    );
  }
}

main();
