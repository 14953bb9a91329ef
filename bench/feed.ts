/**
 * `node dist/bench/feed.js [STREAMS] [SECONDS] [--unpinned] [--addresses N --read-token] [--record]`: what the change
 * feed (GET /plants/events) costs, on one
 * plantstore serve on a fresh SQLite file in its default configuration but for the stream and per-address connection
 * bounds (raised so one client address may hold STREAMS streams, default 1000, beside the creating connections) and
 * METRICS_CACHE_MS (0: the bench reads the server's count of stream writes from /metrics around each phase):
 *   - RSS per idle stream: the server's resident memory with STREAMS streams open minus before, divided by STREAMS;
 *   - fan-out, idle: creates sent one at a time, IDLE_GAP_MS apart, the time from each create's 200 to its event at
 *     every stream;
 *   - fan-out under load: the same for a probe create every PROBE_INTERVAL_MS while 32 connections create;
 *   - durable creates/s at 32 connections for SECONDS: in ROUNDS rounds with STREAMS streams open and read, each
 *     between two runs without streams (its ratio is to their mean; the median round is the figure), then with STREAMS
 *     streams open that never read;
 *   - the writes to the streams' sockets per create in each phase with streams: the fan-out's system calls;
 *   - the CPU per create of the server, of this client and of the whole machine in each, and from them the machine's
 *     ceiling: the ratio the machine's CPU allows at the measured costs, and the same were the fan-out free for the
 *     server (what no change to the server can pass while the client shares the machine).
 * As `npm run bench` measures a server, the server runs on core 0 and this client, both its threads, on core 1
 * (taskset); --unpinned lets every process run on every core, where the client's reading takes CPU the server would
 * have used. The streams are opened and read by a worker thread of this process, on its own event loop: a single
 * event loop reading 1,000 sockets would slow the creating connections' client too, and the ratio would charge that
 * to the server. Times are CLOCK_MONOTONIC (process.hrtime), the same in both threads. The client shares the machine
 * with the server: figures are for comparing, not absolutes.
 *
 * --addresses N opens the streams from N loopback addresses in turn (127.0.0.2 on; Linux answers the whole /8), and
 * --read-token on one read-only token, a dashboard's viewers: the stream limits are then left at their defaults, so
 * the run also shows that the server serves them all.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { createToken, startServer, type ServerProcess } from '../test/helpers/process.js';
import { parsePrometheusText } from '../test/helpers/prometheus.js';
import { median, percentile, procStatusKb, round, sampleProcessDuring } from './metrics.js';
import { pinning, unpinned as unpinnedPlaces } from './environment.js';
import { finishRecording, recordIfAsked, type RunFigures } from './recorder.js';
import { plantstoreEnv } from './servers.js';

const CONNECTIONS = 32;
const IDLE_PROBES = 50;
const PROBE_INTERVAL_MS = 50;
/** Between idle probes: longer than the feed ever waits between reads (src/services.ts). */
const IDLE_GAP_MS = 100;
const WARM_UP_SECONDS = 3;
/** Rounds of creates with streams, each between two without. */
const ROUNDS = 3;
/** Streams opened at once while connecting. */
const OPENING_AT_ONCE = 50;
/**
 * What starts a probe's name. Its first byte is in no other event: Buffer#indexOf looks for a short mark's first byte
 * with memchr, and a first byte that every event has ('p' of plant) would make the reader stop at each.
 */
const PROBE_MARK = Buffer.from('~probe-');
/** Longer than a probe's mark and id. */
const TAIL_BYTES = 48;

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

interface StreamsData {
  readonly port: number;
  readonly token: string;
  /** Loopback addresses the streams connect from, in turn; empty: the system's choice (127.0.0.1). */
  readonly addresses: readonly string[];
}

type ToStreams = { readonly type: 'open'; readonly count: number; readonly reading: boolean } | { readonly type: 'collect' } | { readonly type: 'close' };
type FromStreams =
  | { readonly type: 'opened'; readonly refused: number }
  | { readonly type: 'complete'; readonly id: number }
  | { readonly type: 'collected'; readonly arrivals: Array<[number, number[]]>; readonly closedByServer: number }
  | { readonly type: 'closed' };

/**
 * The streams' thread: opens streams on raw sockets (reading ones look for probe plants, named `~probe-<id>`, in what
 * they receive; the others stop reading once the answer's head has come), and reports each probe's arrival times.
 */
function streamsThread({ port, token, addresses }: StreamsData): void {
  const port_ = parentPort as NonNullable<typeof parentPort>;
  const send = (message: FromStreams) => port_.postMessage(message);
  let sockets: net.Socket[] = [];
  let arrivals = new Map<number, number[]>();
  let closedByServer = 0;
  const readBuffer = Buffer.alloc(256 * 1024);
  let opening = 0;

  function open(reading: boolean): Promise<net.Socket | undefined> {
    return new Promise((resolve) => {
      let head: Buffer = Buffer.alloc(0);
      let started = false;
      /** The end of the last read, copied: a mark split over two reads is found with the next. */
      const tail = Buffer.alloc(TAIL_BYTES * 2);
      let tailLength = 0;
      let lastProbe = 0;
      const scan = (text: Buffer, at: number) => {
        let from = 0;
        for (;;) {
          const mark = text.indexOf(PROBE_MARK, from);
          if (mark === -1) return;
          const quote = text.indexOf(34, mark); // '"'
          if (quote === -1) return;
          const id = Number(text.subarray(mark + PROBE_MARK.length, quote).toString('latin1'));
          from = quote + 1;
          // A stream's events come in order: a probe at or before the last seen is one seen already (at a boundary).
          if (id <= lastProbe) continue;
          lastProbe = id;
          let times = arrivals.get(id);
          if (!times) arrivals.set(id, (times = []));
          times.push(at);
          if (times.length === sockets.length) send({ type: 'complete', id });
        }
      };
      const onData = (chunk: Buffer) => {
        if (!started) {
          head = Buffer.concat([head, chunk]);
          const end = head.indexOf('\r\n\r\n');
          if (end === -1) return;
          started = true;
          if (!head.subarray(0, 12).toString('latin1').endsWith(' 200')) {
            socket.destroy();
            resolve(undefined);
            return;
          }
          if (!reading) socket.pause();
          resolve(socket);
          chunk = head.subarray(end + 4);
        }
        const at = nowMs();
        // A mark split over two reads is found across their boundary; the rest in the read itself, uncopied.
        if (tailLength > 0) {
          const across = Math.min(TAIL_BYTES, chunk.length);
          chunk.copy(tail, tailLength, 0, across);
          scan(tail.subarray(0, tailLength + across), at);
        }
        scan(chunk, at);
        tailLength = Math.min(TAIL_BYTES, chunk.length);
        chunk.copy(tail, 0, chunk.length - tailLength);
      };
      // Reads go into one buffer of this thread, reused (onread), not a new one per read: the client's share of the
      // machine is what the server's creates compete with, and a reader should cost no more than the bytes it takes.
      const onread = {
        buffer: readBuffer,
        callback: (length: number) => {
          onData(readBuffer.subarray(0, length));
          return true;
        },
      };
      const localAddress = addresses.length === 0 ? undefined : addresses[opening++ % addresses.length];
      const socket = net.connect({ port, host: '127.0.0.1', onread, ...(localAddress === undefined ? {} : { localAddress }) });
      socket.setNoDelay(true);
      socket.on('end', () => {
        closedByServer += 1;
      });
      socket.on('error', () => resolve(undefined));
      socket.write(`GET /plants/events HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\n\r\n`);
    });
  }

  port_.on('message', (message: ToStreams) => {
    void (async () => {
      if (message.type === 'open') {
        let refused = 0;
        for (let opened = 0; opened < message.count; opened += OPENING_AT_ONCE) {
          const batch = await Promise.all(Array.from({ length: Math.min(OPENING_AT_ONCE, message.count - opened) }, () => open(message.reading)));
          for (const socket of batch) {
            if (socket) sockets.push(socket);
            else refused += 1;
          }
        }
        send({ type: 'opened', refused });
      } else if (message.type === 'collect') {
        send({ type: 'collected', arrivals: [...arrivals], closedByServer });
        arrivals = new Map();
      } else {
        for (const socket of sockets) socket.destroy();
        sockets = [];
        closedByServer = 0;
        send({ type: 'closed' });
      }
    })();
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
const probeAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/**
 * One timed phase: creates/s; the CPU milliseconds per create of the server (less sensitive than creates/s to what
 * else the machine runs), of this client (all its threads: the creating connections and the streams' reader), and of
 * the whole machine (every core's busy time, kernel work for either side included); and how busy the machine was.
 */
interface Phase {
  readonly perSecond: number;
  readonly cpuMsPerCreate: number;
  readonly clientCpuMsPerCreate: number;
  readonly machineCpuMsPerCreate: number;
  readonly machineBusy: number;
  /** Writes to the streams' sockets per create (the server's plantstore_event_stream_writes_total over the phase). */
  readonly streamWritesPerCreate: number;
}

/** Moves this process, every thread it has so far, to the cores `prefix` (`taskset -c N`) names; later threads inherit them. */
function pinThisProcess(prefix: readonly string[]): void {
  const cores = prefix.at(-1) as string;
  const result = spawnSync('taskset', ['-a', '-c', '-p', cores, String(process.pid)], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`taskset could not pin the bench to core ${cores}: ${result.stderr}`);
}

function post(server: ServerProcess, token: string, id: number, name = `plant ${id}`, via = agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${server.base}/plants`, { method: 'POST', agent: via, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
    request.end(`{"id":${id},"name":"${name}"}`);
  });
}

/** The server's plantstore_event_stream_writes_total now (METRICS_CACHE_MS is 0 for the bench: never a stale count). */
async function streamWrites(server: ServerProcess, metricsToken: string): Promise<number> {
  const response = await fetch(`${server.base}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } });
  const text = await response.text();
  const count = response.ok ? parsePrometheusText(text).value('plantstore_event_stream_writes_total') : undefined;
  if (count === undefined) throw new Error(`GET /metrics answered ${response.status} without plantstore_event_stream_writes_total`);
  return count;
}

class Streams {
  readonly #worker: Worker;
  readonly #waiting = new Map<string, (message: FromStreams) => void>();
  readonly #complete = new Map<number, () => void>();

  constructor(data: StreamsData) {
    this.#worker = new Worker(new URL(import.meta.url), { workerData: data });
    this.#worker.on('message', (message: FromStreams) => {
      if (message.type === 'complete') {
        this.#complete.get(message.id)?.();
        this.#complete.delete(message.id);
        return;
      }
      this.#waiting.get(message.type)?.(message);
    });
  }

  #ask<T extends FromStreams>(message: ToStreams, answer: T['type']): Promise<T> {
    return new Promise((resolve) => {
      this.#waiting.set(answer, (reply) => resolve(reply as T));
      this.#worker.postMessage(message);
    });
  }

  async open(count: number, reading: boolean): Promise<void> {
    const { refused } = await this.#ask<Extract<FromStreams, { type: 'opened' }>>({ type: 'open', count, reading }, 'opened');
    if (refused > 0) throw new Error(`${refused} of ${count} streams were refused`);
  }

  /** Resolves once every stream has received the probe `id`, or after `timeoutMs`. */
  reached(id: number, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.#complete.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  collect(): Promise<Extract<FromStreams, { type: 'collected' }>> {
    return this.#ask({ type: 'collect' }, 'collected');
  }

  async close(): Promise<void> {
    await this.#ask({ type: 'close' }, 'closed');
  }

  terminate(): Promise<number> {
    return this.#worker.terminate();
  }
}

/** The delays from each probe's 200 to its arrival at each stream, sorted, and how many arrivals are missing. */
function delays(answered: ReadonlyMap<number, number>, arrivals: ReadonlyArray<[number, number[]]>, streams: number): { sorted: number[]; missing: number } {
  const byId = new Map(arrivals);
  const sorted: number[] = [];
  let missing = 0;
  for (const [id, at] of answered) {
    const times = byId.get(id) ?? [];
    missing += streams - times.length;
    for (const time of times) sorted.push(Math.max(0, time - at));
  }
  sorted.sort((a, b) => a - b);
  return { sorted, missing };
}

function summary(result: { sorted: number[]; missing: number }): Record<string, number> {
  return { p50: round(percentile(result.sorted, 50)), p99: round(percentile(result.sorted, 99)), max: round(result.sorted.at(-1) ?? Number.NaN), samples: result.sorted.length, missing: result.missing };
}

async function main(): Promise<void> {
  await recordIfAsked('feed');
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { unpinned: { type: 'boolean', default: false }, addresses: { type: 'string' }, 'read-token': { type: 'boolean', default: false } },
  });
  const { unpinned } = values;
  const [streamArgument, secondsArgument] = positionals;
  const streamCount = Number(streamArgument ?? 1000);
  const seconds = Number(secondsArgument ?? 10);
  const addressCount = values.addresses === undefined ? 0 : Number(values.addresses);
  if (!Number.isInteger(addressCount) || addressCount < 0 || addressCount > 250) throw new Error(`--addresses must be a whole number up to 250, got ${values.addresses}`);
  const addresses = Array.from({ length: addressCount }, (_, index) => `127.0.0.${index + 2}`);
  const readToken = values['read-token'];
  // As `npm run bench` measures a server: the server on core 0, this client (both its threads) on core 1.
  const pin = unpinned ? { ...unpinnedPlaces(), note: 'none (--unpinned): the server and this client share every core' } : pinning();
  if (pin.load.length > 0) pinThisProcess(pin.load);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-feed-bench-'));
  const databaseUrl = `sqlite:${path.join(dir, 'bench.db')}`;
  // A dashboard's viewers (--addresses, --read-token) meet the default stream limits; one address needs them raised.
  const streamLimits =
    addressCount > 0 && readToken
      ? {}
      : { FEED_STREAMS_PER_ADDRESS: String(streamCount), FEED_STREAMS_PER_TOKEN: String(streamCount), MAX_CONNECTIONS: String(streamCount + 256) };
  const env = { ...plantstoreEnv(databaseUrl), ...streamLimits, METRICS_CACHE_MS: '0' };
  const token = createToken('bench', env);
  const streamToken = readToken ? createToken('bench-viewer', env, undefined, ['--read-only']) : token;
  const metricsToken = createToken('bench-metrics', env, undefined, ['--scope', 'metrics:read']);
  const server = await startServer(env, { prefix: pin.server });
  const pid = server.child.pid as number;
  /** The server's resident memory now, KiB (a running server always has one). */
  const rssKb = () => procStatusKb(pid, 'VmRSS') as number;
  const streams = new Streams({ port: server.port, token: streamToken, addresses });
  let nextId = 1;
  /**
   * One Phase of creates for `forSeconds`, with a probe create every PROBE_INTERVAL_MS when `probes` is given. Near
   * a machine busy share of 1, the client's own work (reading 1,000 streams, say) takes CPU the server would have
   * used, and creates/s falls for the machine's sake.
   */
  const createsPerSecond = async (forSeconds = seconds, probes?: Map<number, number>): Promise<Phase> => {
    const seconds = forSeconds;
    let done = 0;
    const clientBefore = process.cpuUsage();
    const until = nowMs() + seconds * 1000;
    const probing = probes
      ? (async () => {
          while (nowMs() < until) {
            const id = nextId++;
            await post(server, token, id, `~probe-${id}`, probeAgent);
            probes.set(id, nowMs());
            await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
          }
        })()
      : undefined;
    const creating = () =>
      Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          while (nowMs() < until) {
            if ((await post(server, token, nextId++)) === 200) done += 1;
          }
        }),
      ).then(() => probing);
    const writesBefore = await streamWrites(server, metricsToken);
    const { sampling } = await sampleProcessDuring(pid, creating, 0);
    const client = process.cpuUsage(clientBefore);
    const writes = (await streamWrites(server, metricsToken)) - writesBefore;
    return {
      perSecond: done / seconds,
      cpuMsPerCreate: round((sampling.cpuSeconds * 1000) / done, 3),
      clientCpuMsPerCreate: round((client.user + client.system) / 1000 / done, 3),
      machineCpuMsPerCreate: round((sampling.machineBusySeconds * 1000) / done, 3),
      machineBusy: round(sampling.machineBusyShare, 2),
      streamWritesPerCreate: round(writes / done, 2),
    };
  };
  let recorded: RunFigures | undefined;
  try {
    // Not counted: the first seconds of a fresh server run cold (JIT, the new database's first pages and WAL).
    await createsPerSecond(WARM_UP_SECONDS);
    // Rounds of without, with streams read, without again: each round's ratio is to the phases either side of it, so
    // that what drifts over the run (the database's growth, the disk's sync time) falls on both sides of a ratio.
    const withouts: Phase[] = [await createsPerSecond()];
    const withs: Phase[] = [];
    const loadProbes = new Map<number, number>();
    let rssPerIdleStreamKiB = Number.NaN;
    let idleFanout: { sorted: number[]; missing: number } = { sorted: [], missing: 0 };
    let closedWhileReading = 0;
    const loadArrivals: Array<[number, number[]]> = [];
    for (let round_ = 0; round_ < ROUNDS; round_ += 1) {
      const before = rssKb();
      await streams.open(streamCount, true);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      if (round_ === 0) {
        rssPerIdleStreamKiB = round((rssKb() - before) / streamCount);
        const idleProbes = new Map<number, number>();
        for (let index = 0; index < IDLE_PROBES; index += 1) {
          const id = nextId++;
          const reached = streams.reached(id, 10_000);
          await post(server, token, id, `~probe-${id}`, probeAgent);
          idleProbes.set(id, nowMs());
          await reached;
          // Idle: the feed's last read is long past, as it is when creates are rare.
          await new Promise((resolve) => setTimeout(resolve, IDLE_GAP_MS));
        }
        idleFanout = delays(idleProbes, (await streams.collect()).arrivals, streamCount);
      }
      withs.push(await createsPerSecond(seconds, loadProbes));
      // The last probes' events may still be on their way.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const collected = await streams.collect();
      loadArrivals.push(...collected.arrivals);
      closedWhileReading += collected.closedByServer;
      await streams.close();
      withouts.push(await createsPerSecond());
    }
    const loadFanout = delays(loadProbes, loadArrivals, streamCount);

    await streams.open(streamCount, false);
    const unreadBefore = rssKb();
    const withUnread = await createsPerSecond();
    const unreadAfter = rssKb();
    await streams.close();
    const afterUnread = await createsPerSecond();

    /** The mean of `figure` over the two phases without streams either side of round `index`. */
    const around = (index: number, figure: (phase: Phase) => number) => (figure(withouts[index] as Phase) + figure(withouts[index + 1] as Phase)) / 2;
    /** Each round's figure with streams over the mean of the phases without on either side of it. */
    const perRound = (figure: (phase: Phase) => number, over = (without: number, with_: number) => with_ / without) =>
      withs.map((with_, index) => round(over(around(index, figure), figure(with_)), 3));
    const creates = perRound((phase) => phase.perSecond);
    const serverCpu = perRound((phase) => phase.cpuMsPerCreate, (without, with_) => without / with_);
    const atMeasuredCost = perRound((phase) => phase.machineCpuMsPerCreate, (without, with_) => without / with_);
    // The machine's CPU per create with streams, less what the server's own CPU per create grew by.
    const ifFree = withs.map((with_, index) => {
      const serverGrowth = Math.max(0, with_.cpuMsPerCreate - around(index, (phase) => phase.cpuMsPerCreate));
      return round(around(index, (phase) => phase.machineCpuMsPerCreate) / (with_.machineCpuMsPerCreate - serverGrowth), 3);
    });
    const unreadBaseline = ((withouts.at(-1) as Phase).perSecond + afterUnread.perSecond) / 2;
    const list = (phases: Phase[], figure: (phase: Phase) => number) => phases.map((phase) => round(figure(phase), 3));
    const idle = summary(idleFanout);
    const underLoad = summary(loadFanout);
    recorded = {
      headline: `creates/s with ${streamCount} streams ÷ without ${median(creates)} (median round); fan-out p99 ${idle.p99} ms idle, ${underLoad.p99} ms under load`,
      details: [
        '| figure | value |',
        '| --- | ---: |',
        `| creates/s with streams ÷ without, rounds | ${creates.join(', ')} |`,
        `| server CPU per create, without ÷ with, rounds | ${serverCpu.join(', ')} |`,
        `| fan-out idle, p50 / p99 / max ms | ${idle.p50} / ${idle.p99} / ${idle.max} |`,
        `| fan-out under load, p50 / p99 / max ms | ${underLoad.p50} / ${underLoad.p99} / ${underLoad.max} |`,
        `| writes to the streams per create, rounds | ${list(withs, (phase) => phase.streamWritesPerCreate).join(', ')} |`,
        `| RSS per idle stream, KiB | ${rssPerIdleStreamKiB} |`,
        `| creates/s beside streams that never read ÷ without | ${round(withUnread.perSecond / unreadBaseline, 3)} |`,
      ],
      ratios: creates,
    };
    process.stdout.write(
      JSON.stringify({
        streams: streamCount,
        addresses: addressCount === 0 ? 1 : addressCount,
        readToken,
        pinning: pin.note,
        load: os.loadavg().map((value) => round(value, 2)),
        rssPerIdleStreamKiB,
        fanoutIdleMs: summary(idleFanout),
        fanoutUnderLoadMs: summary(loadFanout),
        createsPerSecond: {
          without: list(withouts, (phase) => Math.round(phase.perSecond)),
          withStreams: list(withs, (phase) => Math.round(phase.perSecond)),
          ratio: { median: median(creates), rounds: creates },
          withUnreadStreams: Math.round(withUnread.perSecond),
          unreadRatio: round(withUnread.perSecond / unreadBaseline, 3),
        },
        serverCpuMsPerCreate: {
          without: list(withouts, (phase) => phase.cpuMsPerCreate),
          withStreams: list(withs, (phase) => phase.cpuMsPerCreate),
          ratio: { median: median(serverCpu), rounds: serverCpu },
          withUnreadStreams: withUnread.cpuMsPerCreate,
        },
        clientCpuMsPerCreate: { without: list(withouts, (phase) => phase.clientCpuMsPerCreate), withStreams: list(withs, (phase) => phase.clientCpuMsPerCreate) },
        machineCpuMsPerCreate: { without: list(withouts, (phase) => phase.machineCpuMsPerCreate), withStreams: list(withs, (phase) => phase.machineCpuMsPerCreate) },
        machineBusy: { without: list(withouts, (phase) => phase.machineBusy), withStreams: list(withs, (phase) => phase.machineBusy), withUnreadStreams: withUnread.machineBusy },
        /** The fan-out's system calls: each read of the change log writes each live stream once, whatever it carries. */
        streamWritesPerCreate: { withStreams: list(withs, (phase) => phase.streamWritesPerCreate), withUnreadStreams: withUnread.streamWritesPerCreate },
        /**
         * What the machine allows, whatever the server does: the creates/s ratio were the machine as busy with streams as
         * without, at the CPU per create each measured; and the same were the server's fan-out free (its CPU per create
         * as without), the client and the kernel still paying what they did.
         */
        machineCeilingRatio: {
          atMeasuredCost: { median: median(atMeasuredCost), rounds: atMeasuredCost },
          ifFanOutCostTheServerNothing: { median: median(ifFree), rounds: ifFree },
        },
        unreadStreams: { rssGrowthMiB: round((unreadAfter - unreadBefore) / 1024), closedWhileReadingByServer: closedWhileReading },
      }) + '\n',
    );
  } catch (error) {
    process.stderr.write(`feed bench: ${(error as Error).message}; the server said:\n${server.output().stderr.slice(-2000)}${server.output().stdout.slice(-2000)}\n`);
    process.exitCode = 1;
  } finally {
    await streams.terminate();
    await server.stop('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
    agent.destroy();
    probeAgent.destroy();
  }
  if (recorded) finishRecording(recorded);
}

if (isMainThread) await main();
else streamsThread(workerData as StreamsData);
