/**
 * `--bulk`: durable plants per second through streamed bulk creates (POST /plants as application/x-ndjson, BULK_STREAMS
 * concurrent streams from bench/bulk-client.ts on the load core) against single creates with the load generator, in
 * pairs on the same server and store, the server pinned to one core as in the create scenario. The headline is the
 * median of the per-pair ratios (bulk plants/s ÷ single-create req/s), with server CPU per plant. Then: single-create
 * latency while one bulk stream runs beside it, and the server's RSS growth over one request of --bulk-lines lines.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Sequence } from '../measure.js';
import { cpuSeconds, mb, median, procStatusKb, ratio3 } from '../metrics.js';
import { finishRecording } from '../recorder.js';
import { cliToken } from '../servers.js';
import { withSession, type BenchSetup } from '../session.js';

const BULK_STREAMS = 4;
/** Ids of bulk lines start here, far above the single creates' sequential ids. */
const BULK_FIRST_ID = 1_000_000_000_000;

interface BulkOutcome {
  readonly ok: number;
  readonly other: number;
  readonly lines: number;
  readonly seconds: number;
  readonly plantsPerSec: number;
}

/** Runs the bulk client on the load core; resolves with what it printed. */
async function runBulkClient(prefix: readonly string[], spec: object): Promise<BulkOutcome> {
  const script = fileURLToPath(new URL('../bulk-client.js', import.meta.url));
  const [command, ...args] = [...prefix, process.execPath, script, JSON.stringify(spec)];
  const child = spawn(command as string, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += String(chunk)));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`bulk client exited ${code}`);
  return JSON.parse(out) as BulkOutcome;
}

export function runBulk(setup: BenchSetup): Promise<void> {
  const { options, log } = setup;
  return withSession(setup, async (session) => {
    const token = cliToken(session.store.databaseUrl);
    const load = { token, connections: options.connections, ids: options.ids, offset: options.prefill, sequence: new Sequence(), rssSampleEveryMs: 0 };
    let nextBulkId = BULK_FIRST_ID;
    const bulkSpec = (server: { url: string }, seconds: number, streams: number, lines = 0) => {
      const spec = { url: server.url, token, streams, seconds, lines, firstId: nextBulkId };
      nextBulkId += 100_000_000;
      return spec;
    };
    const ratios: number[] = [];
    const cpuPerPlant: number[] = [];
    const rows: string[] = [];
    for (let pair = 1; pair <= options.pairs; pair += 1) {
      const server = await session.startPlantstore();
      if (options.warmup > 0) {
        await session.runLoad({ ...load, server, seconds: options.warmup });
        await runBulkClient(setup.pinning.load, bulkSpec(server, options.warmup, BULK_STREAMS));
      }
      const single = await session.runLoad({ ...load, server, seconds: options.duration });
      const cpuBefore = cpuSeconds(server.pid);
      const bulk = await runBulkClient(setup.pinning.load, bulkSpec(server, options.duration, BULK_STREAMS));
      const cpu = cpuSeconds(server.pid) - cpuBefore;
      await session.stop(server);
      const ratio = ratio3(bulk.plantsPerSec / single.load.reqPerSec);
      const micros = Math.round((cpu / bulk.ok) * 1e7) / 10;
      ratios.push(ratio);
      cpuPerPlant.push(micros);
      const row = `| ${pair} | ${Math.round(single.load.reqPerSec)} | ${single.serverCpuMicrosPerRequest.toFixed(1)} | ${Math.round(bulk.plantsPerSec)} | ${micros.toFixed(1)} | ${bulk.other} | ${ratio.toFixed(3)} |`;
      rows.push(row);
      log(`pair ${pair}: single ${Math.round(single.load.reqPerSec)} req/s (${single.serverCpuMicrosPerRequest.toFixed(1)} µs CPU/req); bulk ${Math.round(bulk.plantsPerSec)} plants/s (${micros.toFixed(1)} µs CPU/plant, ${bulk.other} not 200); ratio ${ratio.toFixed(3)}`);
    }

    // Single creates beside one running bulk stream: are other clients starved?
    const server = await session.startPlantstore();
    const alone = await session.runLoad({ ...load, server, seconds: options.duration });
    const beside = runBulkClient(setup.pinning.load, bulkSpec(server, options.duration + 1, 1));
    const withBulk = await session.runLoad({ ...load, server, seconds: options.duration });
    const besideOutcome = await beside;
    log(`single creates alone: p99 ${alone.load.latency.p99.toFixed(2)} ms, ${Math.round(alone.load.reqPerSec)} req/s; beside one bulk stream (${Math.round(besideOutcome.plantsPerSec)} plants/s): p99 ${withBulk.load.latency.p99.toFixed(2)} ms, ${Math.round(withBulk.load.reqPerSec)} req/s`);

    // RSS growth over one long request, after a request of a tenth of its length: what the server holds for the
    // request's length, apart from V8 sizing its heap for the load the first time it sees it.
    const warm = await runBulkClient(setup.pinning.load, bulkSpec(server, 0, 1, BULK_LINES / 10));
    const rssWarm = procStatusKb(server.pid, 'VmRSS') ?? 0;
    log(`warm-up request of ${BULK_LINES / 10} lines: ${warm.ok} answered 200; server RSS ${mb(rssWarm)} MiB after it`);
    const rssBefore = procStatusKb(server.pid, 'VmRSS') ?? 0;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, procStatusKb(server.pid, 'VmRSS') ?? 0)), 50);
    const big = await runBulkClient(setup.pinning.load, bulkSpec(server, 0, 1, BULK_LINES));
    clearInterval(sampler);
    await session.stop(server);
    log(`one request of ${BULK_LINES} lines: ${big.ok} answered 200 in ${big.seconds.toFixed(1)} s; server RSS ${mb(rssBefore)} MiB before, peak ${mb(rssPeak)} MiB (growth ${mb(rssPeak - rssBefore)} MiB)`);

    const medianLine = `median ratio ${median(ratios).toFixed(3)}; median server CPU per bulk plant ${median(cpuPerPlant).toFixed(1)} µs`;
    const table = ['| pair | single req/s | µs CPU/req | bulk plants/s | µs CPU/plant | bulk not 200 | ratio |', '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |', ...rows];
    const after = [
      `single-create p99 alone ${alone.load.latency.p99.toFixed(2)} ms, beside a bulk stream ${withBulk.load.latency.p99.toFixed(2)} ms`,
      `RSS growth over a ${BULK_LINES}-line request, after one of ${BULK_LINES / 10} lines: ${mb(rssPeak - rssBefore)} MiB (${mb(rssBefore)} -> ${mb(rssPeak)} MiB)`,
    ];
    finishRecording({ headline: medianLine, details: [...table, '', ...after], ratios });
    process.stdout.write(
      [
        `bulk (${options.store}, ${BULK_STREAMS} streams) vs single creates (${options.connections} connections), ${options.pairs} pair(s) x ${options.duration}s`,
        '',
        ...table,
        '',
        medianLine,
        ...after,
        '',
      ].join('\n'),
    );
  });
}

/** Lines of the memory run's one request. */
const BULK_LINES = 1_000_000;
