/**
 * The write queue's bound on a real process: a burst of creates from many clients over keep-alive connections, far
 * more than WRITE_QUEUE_LIMIT, is refused with 503 + Retry-After at once rather than absorbed, every request is
 * answered, memory stays flat, and the instance stays healthy. The bound answered in-process is in
 * test/http/write-queue-bound.test.ts.
 */
import assert from 'node:assert/strict';
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { describe, it } from 'node:test';
import { sqliteDatabase } from '../helpers/databases.js';
import { residentMemoryMiB } from '../helpers/flood.js';
import { createToken, errorRecordProblem, startServer } from '../helpers/process.js';

function median(values: number[] | undefined): string {
  if (!values || values.length === 0) return 'n/a';
  const sorted = [...values].sort((a, b) => a - b);
  return (sorted[Math.floor(sorted.length / 2)] as number).toFixed(1);
}

describe('an overload burst on a real process', { timeout: 120_000 }, () => {
  it('refuses what it cannot take with 503 at once, keeps memory flat, and stays healthy', async (t) => {
    const db = await sqliteDatabase();
    const QUEUE = 8;
    const CLIENTS = 96;
    const DURATION_MS = 3000;
    const env = { DATABASE_URL: db.url, WRITE_QUEUE_LIMIT: String(QUEUE) };
    const token = createToken('burst', env);
    const server = await startServer(env);
    try {
      const pid = server.child.pid as number;
      const before = residentMemoryMiB(pid);
      const statuses = new Map<number, number>();
      const latencies: Record<number, number[]> = {};
      let offered = 0;
      let failed = 0;
      let id = 10_000_000;
      const deadline = Date.now() + DURATION_MS;
      const started = Date.now();
      const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS });
      const post = (body: string) =>
        new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
          const request = httpRequest(
            `${server.base}/plants`,
            {
              method: 'POST',
              agent,
              timeout: 30_000,
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
            },
            (response) => {
              let text = '';
              response.setEncoding('utf8');
              response.on('data', (chunk: string) => (text += chunk));
              response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text }));
              response.on('error', reject);
            },
          );
          request.on('timeout', () => request.destroy(new Error('timed out')));
          request.on('error', reject);
          request.end(body);
        });
      const client = async () => {
        while (Date.now() < deadline) {
          offered += 1;
          try {
            const sentAt = performance.now();
            const response = await post(`{"id":${id++},"name":"Burst plant","tag":"overload"}`);
            (latencies[response.status] ??= []).push(performance.now() - sentAt);
            statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            if (response.status !== 200) {
              assert.equal(errorRecordProblem(response.status, response.headers['content-type'], response.text), undefined);
            }
            if (response.status === 503) assert.match(String(response.headers['retry-after']), /^[1-9]\d*$/);
          } catch (error) {
            if (error instanceof assert.AssertionError) throw error;
            failed += 1;
          }
        }
      };
      await Promise.all(Array.from({ length: CLIENTS }, client));
      agent.destroy();
      const seconds = (Date.now() - started) / 1000;
      const during = residentMemoryMiB(pid);
      const ok = statuses.get(200) ?? 0;
      const refused = statuses.get(503) ?? 0;
      assert.deepEqual([...statuses.keys()].filter((status) => status !== 200 && status !== 503), [], JSON.stringify([...statuses]));
      assert.equal(failed, 0, 'every request is answered: none dropped, none timed out');
      assert.ok(server.exited() === false, 'the process is still up');
      assert.equal((await fetch(`${server.base}/healthz`)).status, 200);
      assert.equal((await fetch(`${server.base}/readyz`)).status, 200);
      // Flat memory: the burst costs tens of MiB at most, not a queue that grows with the offered load.
      assert.ok(during.peakMiB - before.currentMiB < 200, `memory grew from ${before.currentMiB} to a peak of ${during.peakMiB} MiB`);
      t.diagnostic(
        `FIGURES overload: ${CLIENTS} clients for ${seconds.toFixed(1)} s, WRITE_QUEUE_LIMIT=${QUEUE}: offered ${(offered / seconds).toFixed(0)} req/s, ` +
          `answered ${((ok + refused) / seconds).toFixed(0)} req/s (${(ok / seconds).toFixed(0)} stored 200/s, ${(refused / seconds).toFixed(0)} refused 503/s), ` +
          `${failed} unanswered; median latency 200: ${median(latencies[200])} ms, 503: ${median(latencies[503])} ms; RSS ${before.currentMiB.toFixed(0)} MiB before, peak ${during.peakMiB.toFixed(0)} MiB`,
      );
    } finally {
      await server.kill();
      await db.cleanup();
    }
  });
});
