/**
 * The wrk load generator (when `wrk` is on PATH): a Lua script, written by the bench into its temp dir, sends every
 * request with the bearer token and either a fresh NewPlant (POST /plants, ids as in ./ids.ts) or a GET from a list of
 * paths (the reads scenario), counts statuses in `response()`, and prints one JSON line from `done()` with the
 * request count, the per-status counts, wrk's socket errors and its latency percentiles. The bench runs
 * `bash -c 'wrk ...; times'` pinned to the load core, so `times` gives wrk's own CPU (its children's user + sys).
 *
 * Ids never repeat: thread t of a run uses seq = seqStart + t * stride + k for its k-th request (k from 0, counted
 * in `request()` whether or not the answer arrives), and the run reports the next free seq, which the bench passes
 * to the next run (warm-up included).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { RANDOM_HI_SPACE, RANDOM_LO_SPACE } from './ids.js';
import type { LoadResult, LoadSpec } from './load.js';

/** One wrk thread: the load gets one core, and one epoll loop is enough to saturate a one-core server. */
export const WRK_THREADS = 1;
/** Ids one thread may use within one run (only matters when WRK_THREADS > 1). */
const STRIDE = 2 ** 22;

const luaString = (value: string) => JSON.stringify(value); // a JSON string literal is a valid Lua string literal here

function script(spec: LoadSpec): string {
  const paths = spec.paths ?? [];
  return `-- written by bench/wrk.ts for one run
local mode = ${luaString(spec.ids)}
local offset = ${spec.offset}
local seq_start = ${spec.seqStart}
local stride = ${STRIDE}
local hi_space = ${RANDOM_HI_SPACE}
local lo_space = ${RANDOM_LO_SPACE}
local auth = ${luaString(`Bearer ${spec.token}`)}
local paths = { ${paths.map(luaString).join(', ')} }
local read_share = ${spec.readShare ?? 1}
local names = { "Monstera deliciosa", "Ficus lyrata", "Pilea peperomioides", "Calathea orbifolia" }
local tags = { "aroid", "fig", "pilea", false }

local threads = {}
local next_tid = 0
function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

local base, k, post_headers, get_headers
ok, non2xx, statuses = 0, 0, {}
sent = 0
function init(args)
  base = seq_start + tid * stride
  k = 0
  math.randomseed(os.time() * 1000 + tid * 7919 + seq_start)
  post_headers = { ["Content-Type"] = "application/json", ["Authorization"] = auth }
  get_headers = { ["Authorization"] = auth }
end

function request()
  if #paths > 0 and (read_share >= 1 or math.random() < read_share) then
    -- Reads alone count what they sent; mixed with creates, sent counts the creates' ids only.
    if read_share >= 1 then sent = sent + 1 end
    return wrk.format("GET", paths[math.random(#paths)], get_headers)
  end
  local seq = base + k
  k = k + 1
  sent = k
  local id
  if mode == "sequential" then
    id = offset + seq
  else
    if seq >= lo_space then error("sequence past 2^25") end
    id = math.random(0, hi_space - 1) * lo_space + seq
  end
  local i = seq % 4 + 1
  local body
  if tags[i] then
    body = string.format('{"id":%.0f,"name":"%s","tag":"%s"}', id, names[i], tags[i])
  else
    body = string.format('{"id":%.0f,"name":"%s"}', id, names[i])
  end
  return wrk.format("POST", "/plants", post_headers, body)
end

function response(status, headers, body)
  if status >= 200 and status < 300 then
    ok = ok + 1
  else
    non2xx = non2xx + 1
    local key = tostring(status)
    statuses[key] = (statuses[key] or 0) + 1
  end
end

function done(summary, latency, requests)
  local total_ok, total_non2xx, codes, next_seq = 0, 0, {}, seq_start
  for _, thread in ipairs(threads) do
    total_ok = total_ok + thread:get("ok")
    total_non2xx = total_non2xx + thread:get("non2xx")
    for code, n in pairs(thread:get("statuses")) do codes[code] = (codes[code] or 0) + n end
    local used = seq_start + thread:get("tid") * stride + thread:get("sent")
    if used > next_seq then next_seq = used end
  end
  local parts = {}
  for code, n in pairs(codes) do table.insert(parts, string.format('"%s":%d', code, n)) end
  if total_ok > 0 then table.insert(parts, string.format('"2xx":%d', total_ok)) end
  local e = summary.errors
  io.write(string.format(
    '\\nWRKJSON {"requests":%d,"durationUs":%d,"ok":%d,"non2xx":%d,"statusCodes":{%s},' ..
    '"errors":%d,"timeouts":%d,"p50":%.0f,"p90":%.0f,"p99":%.0f,"p999":%.0f,"max":%.0f,"mean":%.1f,"nextSeq":%.0f}\\n',
    summary.requests, summary.duration, total_ok, total_non2xx, table.concat(parts, ","),
    e.connect + e.read + e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean, next_seq))
end
`;
}

interface WrkJson {
  requests: number;
  durationUs: number;
  ok: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  errors: number;
  timeouts: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
  nextSeq: number;
}

/** `bash`'s `times`: two lines "XmY.YYYs XmY.YYYs" (the shell, then its children); the children's sum, in seconds. */
function childCpuSeconds(output: string): number {
  const lines = output.trim().split('\n').filter((line) => /^\d+m[\d.]+s \d+m[\d.]+s$/.test(line.trim()));
  const last = lines.at(-1);
  if (!last) return Number.NaN;
  return last
    .trim()
    .split(' ')
    .map((part) => {
      const [m, s] = part.replace(/s$/, '').split('m');
      return Number(m) * 60 + Number(s);
    })
    .reduce((a, b) => a + b, 0);
}

export interface WrkPlace {
  /** Where the run's Lua script is written (and removed after the run). */
  readonly scriptDir: string;
  /** The command wrk runs under, pinning it to the load core. */
  readonly pinPrefix: readonly string[];
  /** Recorded as the LoadResult's generator, e.g. "wrk debian/4.1.0-3+b2 (1 thread, ...)". */
  readonly description: string;
}

export async function runWrk(spec: LoadSpec, place: WrkPlace): Promise<LoadResult> {
  const scriptFile = path.join(place.scriptDir, `wrk-${spec.seqStart}-${process.hrtime.bigint()}.lua`);
  fs.writeFileSync(scriptFile, script(spec));
  // wrk takes whole seconds only (a --quick warm-up of 0.5 s runs for 1 s).
  const target = `${spec.url}${spec.paths?.[0] ?? '/plants'}`;
  const wrkArgs = ['-t', String(WRK_THREADS), '-c', String(spec.connections), '-d', `${Math.max(1, Math.round(spec.duration))}s`, '--timeout', '10s', '-s', scriptFile, target];
  const quoted = wrkArgs.map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`).join(' ');
  const [first, ...rest] = place.pinPrefix;
  const shell = ['bash', '-c', `wrk ${quoted}; code=$?; times; exit $code`];
  const child = first === undefined ? spawn(shell[0] as string, shell.slice(1)) : spawn(first, [...rest, ...shell]);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  fs.rmSync(scriptFile, { force: true });
  const line = /^WRKJSON (.+)$/m.exec(stdout)?.[1];
  if (code !== 0 || !line) throw new Error(`wrk exited with ${code}: ${stderr.trim()}\n${stdout.trim()}`);
  const w = JSON.parse(line) as WrkJson;
  const seconds = w.durationUs / 1e6;
  const ms = (us: number) => Math.round(us) / 1000;
  const cpu = childCpuSeconds(stdout);
  return {
    generator: place.description,
    seconds: Math.round(seconds * 100) / 100,
    responses: w.ok + w.non2xx,
    ok: w.ok,
    non2xx: w.non2xx,
    errors: w.errors,
    timeouts: w.timeouts,
    statusCodes: w.statusCodes,
    reqPerSec: Math.round((w.ok + w.non2xx) / seconds),
    latency: { p50: ms(w.p50), p90: ms(w.p90), p99: ms(w.p99), p999: ms(w.p999), max: ms(w.max), mean: ms(w.mean) },
    nextSeq: spec.paths && (spec.readShare ?? 1) >= 1 ? spec.seqStart : w.nextSeq,
    cpuPercent: Number.isFinite(cpu) ? Math.round((cpu / seconds) * 100) : -1,
    firstId: '',
    lastId: '',
  };
}
