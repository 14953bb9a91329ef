/**
 * What one connection can make a real `plantstore serve` hold is bounded, however it pipelines and however slowly it
 * reads (src/http/connection-bounds.ts). Attack: connections from 127.0.0.2 that each pipeline 7,500 requests and never
 * read; the probes come from 127.0.0.1, a client of their own. Held:
 * the server's resident memory, its liveness, a fresh client's /healthz latency while it lasts, and at once after.
 * Well-behaved pipelining (500 requests on one connection, read as they come) is served in order.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CONNECTION_LIMITS } from '../../src/http/connection-bounds.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { flood, healthzMs, rssMiB } from '../helpers/flood.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

const CONNECTIONS = 48;
const PIPELINED = 7500;
/**
 * The most the server's resident memory may grow under one of these attacks: each connection may hold up to
 * CONNECTION_LIMITS.unanswered parsed requests before it is closed, and V8 keeps the heap it grew for them
 * (docs/memory.md, "Connections").
 */
const RSS_GROWTH_LIMIT_MIB = 100;
/**
 * The connections that stay under CONNECTION_LIMITS.unanswered are held to more: they stay open until their answers
 * stall, so all their parsed requests are alive at once, and on a server whose young generation V8 has not yet widened
 * those alone reach the target above, handlers or none. What this case
 * checks is that the stall rule closes them and that what they hold stays bounded.
 */
const RSS_GROWTH_LIMIT_STALLED_MIB = 140;

/**
 * The flood's address. Not the probes' (127.0.0.1, as are the setup's keep-alive connections): a connection of an
 * address that has overrun its bounds and waits for a slot is answered 503 unread (ConnectionAdmission.shedWaiting),
 * so a probe from the flooding address, once the setup's idle connections and the flood fill that address's share, is
 * shed with the flood, which is right for the server and says nothing about what a fresh client sees.
 */
const FLOOD_ADDRESS = '127.0.0.2';

/**
 * How many of the flood's connections the server still holds established. The flood's closes are counted here, not
 * in the log: besides the bounds' own closes (logged), a request cut off mid-way by the socket's pause can time out
 * (HEADERS_TIMEOUT_MS), and that close is answered with a 408, not logged.
 */
function establishedFromFlood(port: number): number {
  const listed = execFileSync('ss', ['-Htn', 'state', 'established', `( sport = :${port} and dst ${FLOOD_ADDRESS} )`], { encoding: 'utf8' });
  return listed.split('\n').filter((line) => line.trim() !== '').length;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/**
 * How long a flood is watched at most (the watch ends 3 s after the server has closed every connection, which is
 * usually within a second or two). A connection the server has not read far enough to overrun (its socket paused while
 * its answers wait) is closed by the stall rule alone, 10 s after the kernel last took some of its answers, which can
 * be seconds into the flood while 48 connections' answers fill their send buffers: one run of the CI clone saw 46 of
 * 48 closed within 15 s.
 */
const FLOOD_MS = 25_000;

interface Observed {
  readonly rssBeforeMiB: number;
  readonly rssPeakMiB: number;
  readonly healthzMedianMs: number;
  readonly healthzAfterMs: number;
  readonly closedByServer: number;
}

/**
 * Floods for up to `durationMs` (less once the server has closed every flooding connection and `settleMs` more have
 * passed, which shows the bound held), sampling RSS and /healthz from a fresh connection every 200 ms.
 */
async function observeFlood(server: ServerProcess, request: string, count: number, durationMs: number, settleMs: number): Promise<Observed> {
  const pid = server.child.pid as number;
  await healthzMs(server.base);
  const rssBeforeMiB = rssMiB(pid);
  const attack = await flood(server.port, request, count, CONNECTIONS, { sources: [FLOOD_ADDRESS] });
  // Every flooding connection is established once flood() resolves; each the server closes leaves that state.
  const closedByServer = () => CONNECTIONS - establishedFromFlood(server.port);
  const started = performance.now();
  let rssPeakMiB = rssBeforeMiB;
  const latencies: number[] = [];
  let allClosedAt: number | undefined;
  try {
    while (performance.now() - started < durationMs) {
      assert.equal(server.exited(), false, 'the server is alive');
      rssPeakMiB = Math.max(rssPeakMiB, rssMiB(pid));
      latencies.push(await healthzMs(server.base));
      rssPeakMiB = Math.max(rssPeakMiB, rssMiB(pid));
      if (closedByServer() === CONNECTIONS) allClosedAt ??= performance.now();
      if (allClosedAt !== undefined && performance.now() - allClosedAt >= settleMs) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    await attack.end();
  }
  const closed = closedByServer();
  await new Promise((resolve) => setTimeout(resolve, 100));
  const healthzAfterMs = await healthzMs(server.base);
  rssPeakMiB = Math.max(rssPeakMiB, rssMiB(pid));
  return { rssBeforeMiB, rssPeakMiB, healthzMedianMs: median(latencies), healthzAfterMs, closedByServer: closed };
}

function describeObserved(label: string, observed: Observed): string {
  return (
    `${label}: RSS ${observed.rssBeforeMiB.toFixed(0)} MiB before, peak ${observed.rssPeakMiB.toFixed(0)} MiB ` +
    `(+${(observed.rssPeakMiB - observed.rssBeforeMiB).toFixed(0)}); /healthz median ${observed.healthzMedianMs.toFixed(1)} ms during, ` +
    `${observed.healthzAfterMs.toFixed(1)} ms after; ${observed.closedByServer} of ${CONNECTIONS} connections closed by the server`
  );
}

function assertBounded(observed: Observed, rssGrowthLimitMiB = RSS_GROWTH_LIMIT_MIB): void {
  assert.ok(
    observed.rssPeakMiB - observed.rssBeforeMiB < rssGrowthLimitMiB,
    `RSS grew ${(observed.rssPeakMiB - observed.rssBeforeMiB).toFixed(0)} MiB (limit ${rssGrowthLimitMiB})`,
  );
  assert.ok(observed.healthzMedianMs < 100, `/healthz median ${observed.healthzMedianMs.toFixed(1)} ms during the flood`);
  assert.ok(observed.healthzAfterMs < 100, `/healthz took ${observed.healthzAfterMs.toFixed(1)} ms after the flood`);
  assert.equal(observed.closedByServer, CONNECTIONS, 'the server closed every connection that did not read');
}

describe('pipelining without reading, against a real server', { timeout: 180_000 }, () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let token: string;

  before(async () => {
    db = await sqliteDatabase();
    token = createToken('flood', { DATABASE_URL: db.url });
    server = await startServer({ DATABASE_URL: db.url });
    // 1,000 plants, so that each list answer below is a full page; 50 at a time, well within MAX_CONNECTIONS.
    for (let from = 1; from <= 1000; from += 50) {
      const creates = Array.from({ length: 50 }, (_, index) =>
        fetch(`${server.base}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ id: from + index, name: `Plant number ${from + index} with a longer name`, tag: 'flood' }),
        }).then((response) => assert.equal(response.status, 200)),
      );
      await Promise.all(creates);
    }
  });
  after(async () => {
    if (server) assert.equal((await server.stop()).code, 0, 'a clean shutdown after the floods');
    await db?.cleanup();
  });

  it(`${CONNECTIONS} connections × ${PIPELINED} GET /openapi.json, never read: memory bounded, /healthz prompt, every connection closed`, async (t) => {
    const observed = await observeFlood(server, 'GET /openapi.json HTTP/1.1\r\nHost: a\r\n\r\n', PIPELINED, FLOOD_MS, 3000);
    t.diagnostic(describeObserved('GET /openapi.json', observed));
    assertBounded(observed);
  });

  it(`${CONNECTIONS} connections × ${PIPELINED} authenticated GET /plants?limit=1000, never read: the same`, async (t) => {
    const request = `GET /plants?limit=1000 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${token}\r\n\r\n`;
    const observed = await observeFlood(server, request, PIPELINED, FLOOD_MS, 3000);
    t.diagnostic(describeObserved('GET /plants?limit=1000', observed));
    assertBounded(observed);
  });

  const UNDER_BOUND = Math.floor(CONNECTION_LIMITS.unanswered * 0.8);
  it(`${CONNECTIONS} connections × ${UNDER_BOUND} (fewer than ${CONNECTION_LIMITS.unanswered} unanswered) never read: held bounded, closed ${CONNECTION_LIMITS.stalledMs / 1000} s after their answers stall`, async (t) => {
    const observed = await observeFlood(server, 'GET /openapi.json HTTP/1.1\r\nHost: a\r\n\r\n', UNDER_BOUND, CONNECTION_LIMITS.stalledMs + 5000, 500);
    t.diagnostic(describeObserved(`${UNDER_BOUND} × GET /openapi.json`, observed));
    assertBounded(observed, RSS_GROWTH_LIMIT_STALLED_MIB);
  });

  it('500 requests pipelined on one connection and read as they come are all answered, in order', async () => {
    const socket = connect(server.port, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    await new Promise((resolve) => socket.once('connect', resolve));
    const requests = Array.from({ length: 500 }, (_, index) => {
      const last = index === 499 ? 'Connection: close\r\n' : '';
      return `GET /plants/${index + 1} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${token}\r\nX-Request-Id: pipelined-${index}\r\n${last}\r\n`;
    });
    socket.write(requests.join(''));
    await new Promise((resolve) => socket.once('close', resolve));
    const text = Buffer.concat(received).toString('utf8');
    const ids = [...text.matchAll(/^x-request-id: (pipelined-\d+)\r$/gim)].map((match) => match[1]);
    assert.deepEqual(
      ids,
      requests.map((_, index) => `pipelined-${index}`),
      'every answer, in the order of the requests',
    );
    const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((match) => match[1]);
    assert.deepEqual(new Set(statuses), new Set(['200']));
    assert.match(text, /"id":500,"name":"Plant number 500 with a longer name","tag":"flood"\}$/);
  });
});
