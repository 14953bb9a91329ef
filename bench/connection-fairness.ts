/**
 * Connection fairness, measured on a real `plantstore serve` in its default configuration (docs/connections.md):
 * what the process tests assert as counts, with the latencies they may not assert.
 *
 *   npm run --silent compile && node dist/bench/connection-fairness.js [attacker sockets] [probes]
 *
 * 1. 1,000 creates at once from 127.0.0.1, a connection each: how many 200s, 503s, socket errors; RSS growth.
 * 2. An attacker at 127.0.0.2 holding 500 sockets (or as many as the first argument says), each reopened at once, in each of its
 *    three ways (idle, slow headers, idle keep-alive), while a probe at 127.0.0.3 sends /healthz and a create in turn:
 *    how many of each succeed within 1 s.
 * 0. RSS per idle connection: 500 served, then 2,000 waiting (50 per address; run first, on a fresh server).
 */
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import os from 'node:os';
import { sqliteDatabase } from '../test/helpers/databases.js';
import { concurrentCreates, holdSockets, probe, type HoldMode, type ProbeResult } from '../test/helpers/fair-share.js';
import { rssMiB } from '../test/helpers/flood.js';
import { createToken, startServer } from '../test/helpers/process.js';
import { plantstoreEnv } from './servers.js';

const attackers = Number(process.argv[2] ?? 500);
const probes = Number(process.argv[3] ?? 100);
const WITHIN_MS = 1000;

function summary(results: ProbeResult[]): string {
  const within = results.filter((result) => result.status === 200 && result.ms <= WITHIN_MS).length;
  const sorted = results.map((result) => result.ms).sort((a, b) => a - b);
  const others = results.filter((result) => result.status !== 200).map((result) => result.status);
  return `${within}/${results.length} 200 within ${WITHIN_MS} ms (median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)} ms, max ${sorted.at(-1)?.toFixed(0)} ms)${others.length ? `, others: ${others.join(' ')}` : ''}`;
}

async function openIdle(port: number, count: number, localAddress: string): Promise<Socket[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const socket = connect({ port, host: '127.0.0.1', localAddress });
      socket.on('error', () => undefined);
      await once(socket, 'connect');
      return socket;
    }),
  );
}

const db = await sqliteDatabase();
console.log(`plantstore serve, defaults, Node ${process.version}, load average ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}`);
const env = plantstoreEnv(db.url);
const token = createToken('fairness', env);
const server = await startServer({ ...env, LOG_LEVEL: 'warn' });
const pid = server.child.pid as number;
try {
  // Idle connections: 500 served (10 addresses × 50, under MAX_CONNECTIONS), then 2,000 more that wait (40 × 50).
  const held: Socket[] = [];
  const idleBefore = rssMiB(pid);
  for (let address = 0; address < 10; address += 1) held.push(...(await openIdle(server.port, 50, `127.0.1.${address + 1}`)));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const served = rssMiB(pid);
  for (let address = 10; address < 50; address += 1) held.push(...(await openIdle(server.port, 50, `127.0.1.${address + 1}`)));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const waiting = rssMiB(pid);
  for (const socket of held) socket.destroy();
  console.log(
    `idle connections: 500 served: RSS ${idleBefore.toFixed(0)} → ${served.toFixed(0)} MiB (${(((served - idleBefore) * 1024) / 500).toFixed(1)} KiB each); ` +
      `2,000 more waiting: → ${waiting.toFixed(0)} MiB (${(((waiting - served) * 1024) / 2000).toFixed(1)} KiB each)`,
  );
  await new Promise((resolve) => setTimeout(resolve, 1000));

  const before = rssMiB(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 20);
  const started = performance.now();
  const answers = await concurrentCreates(server.base, token, { count: 1000, localAddress: '127.0.0.1', firstId: 1n });
  clearInterval(sampler);
  console.log(
    `1000 concurrent creates from one address: ${JSON.stringify(Object.fromEntries(answers.statuses))}, socket errors ${JSON.stringify(Object.fromEntries(answers.socketErrors))}, ` +
      `unexplained ${answers.unexplained.length}, in ${(performance.now() - started).toFixed(0)} ms; RSS ${before.toFixed(0)} → peak ${peak.toFixed(0)} MiB`,
  );

  let firstId = 10_000n;
  for (const mode of ['idle', 'slowloris', 'keep-alive'] as HoldMode[]) {
    const holder = holdSockets(server.port, { count: attackers, localAddress: '127.0.0.2', mode });
    // Let the attack fill its share and its queue before probing.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const results = await probe(server.base, token, { count: probes, localAddress: '127.0.0.3', gapMs: 50, timeoutMs: 5000, firstId });
    firstId += BigInt(probes);
    holder.stop();
    console.log(`attacker holding ${attackers} ${mode} sockets (${holder.opened()} opened): /healthz ${summary(results.healthz)}; creates ${summary(results.creates)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
} finally {
  await server.kill();
  await db.cleanup();
}
