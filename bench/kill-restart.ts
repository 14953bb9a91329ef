/**
 * 64 `fetch` workers (Node's global pool, its defaults) creating plants from one address while a real
 * `plantstore serve` with defaults (SQLite) is SIGKILLed and started again on the same port three times, 2 s apart;
 * then every acknowledged create is read back. Prints how long it all took and how many acknowledged creates were
 * lost (asked: 0, within 60 s).
 *
 *   npm run --silent compile && node dist/bench/kill-restart.js
 */
import os from 'node:os';
import { sqliteDatabase } from '../test/helpers/databases.js';
import { createToken, startServer, type ServerProcess } from '../test/helpers/process.js';
import { plantstoreEnv } from './servers.js';

const WORKERS = 64;
const KILLS = 3;

const db = await sqliteDatabase();
const env = plantstoreEnv(db.url);
const token = createToken('kill-restart', env);
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
console.log(`plantstore serve, defaults, SQLite, Node ${process.version}, load average ${os.loadavg().map((load) => load.toFixed(1)).join(' ')}`);
const started = performance.now();
let server: ServerProcess = await startServer({ ...env, LOG_LEVEL: 'warn' });
const port = server.port;
const acknowledged: bigint[] = [];
let nextId = 1n;
let failed = 0;
let stopped = false;
const worker = async () => {
  while (!stopped) {
    const id = nextId;
    nextId += 1n;
    try {
      const response = await fetch(`http://127.0.0.1:${port}/plants`, { method: 'POST', headers, body: `{"id":${id},"name":"kept ${id}"}`, signal: AbortSignal.timeout(30_000) });
      await response.arrayBuffer();
      if (response.status === 200) acknowledged.push(id);
    } catch {
      failed += 1;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
};
const workers = Array.from({ length: WORKERS }, worker);
try {
  for (let kill = 0; kill < KILLS; kill += 1) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    server.child.kill('SIGKILL');
    await server.kill();
    server = await startServer({ ...env, LOG_LEVEL: 'warn' }, { port });
  }
  await new Promise((resolve) => setTimeout(resolve, 2000));
  stopped = true;
  await Promise.all(workers);
  let lost = 0;
  for (const id of acknowledged) {
    const response = await fetch(`${server.base}/plants/${id}`, { headers });
    await response.arrayBuffer();
    if (response.status !== 200) lost += 1;
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`${WORKERS} fetch workers, ${KILLS} SIGKILLs and restarts: ${acknowledged.length} creates acknowledged, ${failed} cut off by the kills, ${lost} acknowledged and lost; done in ${seconds.toFixed(1)} s`);
} finally {
  stopped = true;
  await server.kill();
  await db.cleanup();
}
