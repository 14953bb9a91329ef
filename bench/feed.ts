/**
 * `node dist/bench/feed.js [STREAMS] [SECONDS]`: what the change feed (GET /plants/events) costs, on one plantstore
 * serve on a fresh SQLite file in its default configuration but for the stream bounds (raised so one client address may
 * hold STREAMS streams, default 1000):
 *   - RSS per idle stream: the server's resident memory with STREAMS streams open minus before, divided by STREAMS;
 *   - fan-out: for creates sent one at a time, the time from each create's 200 to its event at every stream (p50,
 *     p99 over every stream and create): the 200 is sent after the commit, and so is the wake-up;
 *   - durable creates/s at 32 connections for SECONDS, without streams and with STREAMS open (the ratio).
 * The client runs in this process, on the same machine: figures are for comparing, not absolutes.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createToken, startServer, type ServerProcess } from '../test/helpers/process.js';
import { plantstoreEnv } from './servers.js';

const STREAMS = Number(process.argv[2] ?? 1000);
const SECONDS = Number(process.argv[3] ?? 10);
const CONNECTIONS = 32;
const FANOUT_CREATES = 50;

let parsing = false;

const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });

function rssKb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

function post(server: ServerProcess, token: string, id: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${server.base}/plants`, { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
    request.end(`{"id":${id},"name":"plant ${id}"}`);
  });
}

/** One stream: calls `onEvent` with the plant id of each created event and the time it arrived. */
function openStream(server: ServerProcess, token: string, onEvent: (id: number, at: number) => void): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${server.base}/plants/events`, { agent: false, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, (response) => {
      if (response.statusCode !== 200) reject(new Error(`stream answered ${response.statusCode}`));
      response.setEncoding('utf8');
      let pending = '';
      response.on('data', (chunk: string) => {
        // While creates/s is measured the streams are only drained: parsing 1,000 streams would take this process's core.
        if (!parsing) return;
        const at = performance.now();
        pending += chunk;
        let end: number;
        while ((end = pending.indexOf('\n\n')) !== -1) {
          const match = /data: \{"id":(\d+)/.exec(pending.slice(0, end));
          if (match) onEvent(Number(match[1]), at);
          pending = pending.slice(end + 2);
        }
      });
      resolve(request);
    });
    request.on('error', reject);
  });
}

async function createsPerSecond(server: ServerProcess, token: string, firstId: number): Promise<number> {
  let next = firstId;
  let done = 0;
  const until = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        if ((await post(server, token, next++)) === 200) done += 1;
      }
    }),
  );
  return done / SECONDS;
}

const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-feed-bench-'));
  const databaseUrl = `sqlite:${path.join(dir, 'bench.db')}`;
  const env = { ...plantstoreEnv(databaseUrl), FEED_STREAMS_PER_ADDRESS: String(STREAMS), FEED_STREAMS_PER_TOKEN: String(STREAMS), MAX_CONNECTIONS: String(STREAMS + 256), MAX_PENDING_REQUESTS: String(STREAMS + 1024) };
  const token = createToken('bench', env);
  const server = await startServer(env);
  try {
    const baseline = await createsPerSecond(server, token, 1);
    const before = rssKb(server.child.pid as number);
    const arrivals = new Map<number, number[]>();
    const streams: http.ClientRequest[] = [];
    for (let index = 0; index < STREAMS; index += 1) {
      streams.push(await openStream(server, token, (id, at) => arrivals.get(id)?.push(at)));
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const idle = rssKb(server.child.pid as number);
    const delays: number[] = [];
    parsing = true;
    for (let index = 0; index < FANOUT_CREATES; index += 1) {
      const id = 10_000_000 + index;
      const times: number[] = [];
      arrivals.set(id, times);
      await post(server, token, id);
      const answered = performance.now();
      while (times.length < STREAMS) await new Promise((resolve) => setTimeout(resolve, 5));
      for (const at of times) delays.push(Math.max(0, at - answered));
    }
    parsing = false;
    delays.sort((a, b) => a - b);
    const withStreams = await createsPerSecond(server, token, 20_000_000);
    for (const stream of streams) stream.destroy();
    process.stdout.write(
      JSON.stringify({
        streams: STREAMS,
        rssPerIdleStreamKiB: Math.round(((idle - before) / STREAMS) * 10) / 10,
        fanoutMs: { p50: Math.round(percentile(delays, 50) * 10) / 10, p99: Math.round(percentile(delays, 99) * 10) / 10, samples: delays.length },
        createsPerSecond: { withoutStreams: Math.round(baseline), withStreams: Math.round(withStreams), ratio: Math.round((withStreams / baseline) * 1000) / 1000 },
      }) + '\n',
    );
  } catch (error) {
    process.stderr.write(`feed bench: ${(error as Error).message}; the server said:\n${server.output().stderr.slice(-2000)}${server.output().stdout.slice(-2000)}\n`);
    process.exitCode = 1;
  } finally {
    await server.stop('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
    agent.destroy();
  }
}

await main();
