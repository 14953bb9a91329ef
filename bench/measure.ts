/** One measured load run: the generator drives a server while /proc samples that server. */
import { runGenerator, type GeneratorPlace, type LoadGenerator } from './generator.js';
import type { IdMode } from './ids.js';
import type { LoadResult, LoadSpec } from './load.js';
import { sampleProcessDuring } from './metrics.js';
import type { BenchServer } from './servers.js';

/** The next unused load sequence number: every run of an invocation, warm-ups included, sends ids never sent before. */
export class Sequence {
  next = 1;
}

/** Where and with what every run of an invocation loads. */
export interface LoadPlace extends GeneratorPlace {
  readonly generator: LoadGenerator;
}

export interface LoadRun {
  readonly server: BenchServer;
  readonly token: string;
  readonly seconds: number;
  readonly connections: number;
  readonly ids: IdMode;
  /** Added to sequential ids: the prefill's last id. */
  readonly offset: number;
  readonly sequence: Sequence;
  /** Also sample VmRSS this often (the soak); 0: only the peak. */
  readonly rssSampleEveryMs: number;
  /** GET one of these (reads) instead of POSTing fresh plants. */
  readonly paths?: readonly string[] | undefined;
  /** With paths: the share of requests that GET them, the rest POSTing fresh plants (mixed traffic); 1 when not given. */
  readonly readShare?: number | undefined;
}

export interface LoadMeasurement {
  readonly load: LoadResult;
  readonly rssPeakKb: number;
  readonly rssSamplesKb: number[];
  /** Server CPU over the run, percent of one core. */
  readonly serverCpuPercent: number;
  /** Server CPU time per answered request, microseconds: steadier than req/s on a shared machine. */
  readonly serverCpuMicrosPerRequest: number;
  /** Of which the server's main thread's (with WORKERS > 1 on SQLite: the writer's). */
  readonly mainThreadCpuMicrosPerRequest: number;
  /** How busy the whole machine was (every core: server, load generator, kernel), and its busy CPU per answered request. */
  readonly machineBusyShare: number;
  readonly machineCpuMicrosPerRequest: number;
}

export async function runLoad(place: LoadPlace, run: LoadRun): Promise<LoadMeasurement> {
  const spec: LoadSpec = {
    url: run.server.url,
    token: run.token,
    connections: run.connections,
    duration: run.seconds,
    ids: run.ids,
    offset: run.offset,
    seqStart: run.sequence.next,
    ...(run.paths ? { paths: run.paths } : {}),
    ...(run.readShare !== undefined ? { readShare: run.readShare } : {}),
  };
  const { result: load, sampling } = await sampleProcessDuring(run.server.pid, () => runGenerator(place.generator, spec, place), run.rssSampleEveryMs);
  run.sequence.next = load.nextSeq;
  // The load process needs a moment to start before requests flow; CPU is over the whole window, so slightly low.
  return {
    load,
    rssPeakKb: sampling.rssPeakKb,
    rssSamplesKb: sampling.rssSamplesKb,
    serverCpuPercent: Math.round((sampling.cpuSeconds / sampling.elapsedSeconds) * 100),
    serverCpuMicrosPerRequest: load.responses > 0 ? Math.round((sampling.cpuSeconds * 1e6) / load.responses) : 0,
    mainThreadCpuMicrosPerRequest: load.responses > 0 ? Math.round((sampling.mainThreadCpuSeconds * 1e6) / load.responses * 10) / 10 : 0,
    machineBusyShare: Math.round(sampling.machineBusyShare * 100) / 100,
    machineCpuMicrosPerRequest: load.responses > 0 ? Math.round((sampling.machineBusySeconds * 1e6) / load.responses) : 0,
  };
}
