/**
 * One load run, in its own process so that it can be pinned to the load core (`taskset -c 1`): autocannon with
 * keep-alive connections, every request a fresh NewPlant with an id never sent before in this bench invocation.
 * Prints one JSON line (LoadResult) on stdout.
 *
 * Usage: node dist/bench/load.js '<LoadSpec as JSON>'
 */
import { createRequire } from 'node:module';
import autocannon from 'autocannon';
import { loadId, type IdMode } from './ids.js';

export interface LoadSpec {
  readonly url: string;
  readonly token: string;
  readonly connections: number;
  /** Seconds. */
  readonly duration: number;
  readonly ids: IdMode;
  /** Sequential ids are offset + seq; random ids carry seq in their low bits. */
  readonly offset: number;
  /** The first sequence number this run may use; the result says where the next run starts. */
  readonly seqStart: number;
  /** Reads scenario: GET one of these paths (chosen at random per request) instead of POSTing plants. */
  readonly paths?: readonly string[];
  /** With paths: the share of requests (0 to 1) that GET one of them, the rest POSTing fresh plants; 1 when not given. */
  readonly readShare?: number;
}

export interface LoadResult {
  readonly generator: string;
  readonly seconds: number;
  readonly responses: number;
  readonly ok: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly statusCodes: Record<string, number>;
  readonly reqPerSec: number;
  /** Milliseconds, from every response (not only 2xx), at microsecond resolution. */
  readonly latency: { readonly p50: number; readonly p90: number; readonly p99: number; readonly p999: number; readonly max: number; readonly mean: number };
  readonly nextSeq: number;
  /** CPU time of this load process over the run, as a percentage of one core. */
  readonly cpuPercent: number;
  readonly firstId: string;
  readonly lastId: string;
}

const NAMES = ['Monstera deliciosa', 'Ficus lyrata', 'Pilea peperomioides', 'Calathea orbifolia'];
const TAGS = ['aroid', 'fig', 'pilea', undefined];

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec;
  const version = (createRequire(import.meta.url)('autocannon/package.json') as { version: string }).version;
  const paths = spec.paths;
  let seq = spec.seqStart;
  let firstId: number | undefined;
  let lastId = 0;
  const nextBody = (): string => {
    const id = loadId(spec.ids, spec.offset, seq);
    const k = seq % 4;
    seq += 1;
    firstId ??= id;
    lastId = id;
    const tag = TAGS[k];
    return tag === undefined ? `{"id":${id},"name":"${NAMES[k]}"}` : `{"id":${id},"name":"${NAMES[k]}","tag":"${tag}"}`;
  };

  let latencies = new Float64Array(1 << 16);
  let count = 0;
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    pipelining: 1,
    duration: spec.duration,
    timeout: 10,
    requests: [
      paths && paths.length > 0 && (spec.readShare ?? 1) < 1
        ? {
            method: 'POST',
            path: '/plants',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${spec.token}` },
            setupRequest: (request) =>
              Math.random() < (spec.readShare ?? 1)
                ? { ...request, method: 'GET', path: paths[Math.floor(Math.random() * paths.length)] as string, body: undefined }
                : { ...request, method: 'POST', path: '/plants', body: nextBody() },
          }
        : paths && paths.length > 0
        ? {
            method: 'GET',
            path: paths[0] as string,
            headers: { authorization: `Bearer ${spec.token}` },
            setupRequest: (request) => ({ ...request, path: paths[Math.floor(Math.random() * paths.length)] as string }),
          }
        : {
            method: 'POST',
            path: '/plants',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${spec.token}` },
            setupRequest: (request) => ({ ...request, body: nextBody() }),
          },
    ],
  });
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[count++] = responseTime;
  });
  const cpuStart = process.cpuUsage();
  const wallStart = process.hrtime.bigint();
  const result = await instance;
  const cpu = process.cpuUsage(cpuStart);
  const wallMicros = Number(process.hrtime.bigint() - wallStart) / 1000;
  const sorted = latencies.subarray(0, count).sort();
  let sum = 0;
  for (const value of sorted) sum += value;
  const statusCodes: Record<string, number> = {};
  for (const [code, { count: n }] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = n;
  const ok = result['2xx'];
  const responses = ok + result.non2xx;
  const round = (ms: number) => Math.round(ms * 1000) / 1000;
  const out: LoadResult = {
    generator: `autocannon ${version}`,
    seconds: result.duration,
    responses,
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    reqPerSec: Math.round(responses / result.duration),
    latency: {
      p50: round(percentile(sorted, 50)),
      p90: round(percentile(sorted, 90)),
      p99: round(percentile(sorted, 99)),
      p999: round(percentile(sorted, 99.9)),
      max: round(sorted[sorted.length - 1] ?? 0),
      mean: round(count === 0 ? 0 : sum / count),
    },
    nextSeq: seq,
    cpuPercent: Math.round(((cpu.user + cpu.system) / wallMicros) * 100),
    firstId: String(firstId ?? ''),
    lastId: String(lastId),
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`load: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
