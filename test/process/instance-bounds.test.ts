/**
 * What the whole instance holds is bounded by configuration, not by how many connections clients open (issue 30):
 * MAX_CONNECTIONS connections at most (TLS handshakes included, each cut off after TLS_HANDSHAKE_TIMEOUT_MS), and
 * MAX_PENDING_REQUESTS requests parsed and not answered over all of them. Attack: 400 connections, each pipelining
 * 409 GET /healthz (under the per-connection bound of 512) and never reading; the server's resident memory must stay
 * under the ceiling docs/memory.md gives.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import { connect, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { issueServerCertificate, makeCertificateAuthority } from '../helpers/certificates.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { flood, healthzMs, rssMiB } from '../helpers/flood.js';
import { startServer, type ServerProcess } from '../helpers/process.js';

const CONNECTIONS = 400;
const PIPELINED = 409;
/**
 * The most resident memory may grow under the flood, over the server's own before it: docs/memory.md, "The whole
 * instance": MAX_CONNECTIONS' 128 connections at their worst, about 1.6 MiB each (+203 MiB measured on an idle
 * machine, where the flood is parsed fastest), with V8's slack. Without the instance-wide bounds, the same flood grew
 * it by 290 to 430 MiB.
 */
const RSS_GROWTH_CEILING_MIB = 256;

/** Opens `count` connections and waits until each is connected; none sends anything. */
async function openIdle(port: number, count: number): Promise<Socket[]> {
  return Promise.all(
    Array.from({ length: count }, () => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      return once(socket, 'connect').then(() => socket);
    }),
  );
}

/** Resolves true if the server closes the socket within `ms`, false otherwise. */
function closedWithin(socket: Socket, ms: number): Promise<boolean> {
  if (socket.destroyed || socket.readableEnded) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

describe('instance-wide bounds, against a real server', { timeout: 240_000 }, () => {
  const dbs: TestDatabase[] = [];
  const servers: ServerProcess[] = [];
  after(async () => {
    for (const server of servers) await server.kill();
    for (const db of dbs) await db.cleanup();
  });
  const serve = async (env: Record<string, string>, options: Parameters<typeof startServer>[1] = {}) => {
    const db = await sqliteDatabase();
    dbs.push(db);
    const server = await startServer({ DATABASE_URL: db.url, ...env }, options);
    servers.push(server);
    return server;
  };

  it(`${CONNECTIONS} connections × ${PIPELINED} pipelined GET /healthz, never read: resident memory grows less than ${RSS_GROWTH_CEILING_MIB} MiB, /healthz answers`, async (t) => {
    const server = await serve({});
    const pid = server.child.pid as number;
    await healthzMs(server.base);
    const before = rssMiB(pid);
    let peak = before;
    const attack = await flood(server.port, 'GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n', PIPELINED, CONNECTIONS, { untilSent: true });
    // A probe from a fresh connection, started now and then: how long the flood keeps the server busy (its CPU, not
    // its memory, which is what is bounded here) is reported, not asserted.
    let probe: Promise<number | undefined> = Promise.resolve(undefined);
    const latencies: Array<number | undefined> = [];
    try {
      // The server's memory is sampled every 50 ms while the flood's requests are dealt with, and a while after.
      const started = performance.now();
      while (performance.now() - started < 10_000) {
        assert.equal(server.exited(), false, 'the server is alive');
        peak = Math.max(peak, rssMiB(pid));
        const done = await Promise.race([probe.then(() => true), new Promise((resolve) => setTimeout(resolve, 50, false))]);
        if (done) {
          latencies.push(await probe);
          probe = healthzMs(server.base).catch(() => undefined);
        }
      }
    } finally {
      await attack.end();
    }
    peak = Math.max(peak, rssMiB(pid));
    const closed = server.output().stdout.split('the server holds too many unanswered requests').length - 1;
    const answered = latencies.filter((ms): ms is number => ms !== undefined).sort((a, b) => a - b);
    t.diagnostic(
      `RSS ${before.toFixed(0)} MiB before, peak ${peak.toFixed(0)} MiB (+${(peak - before).toFixed(0)}); /healthz probes during the flood: ` +
        `${answered.length} answered (median ${answered[Math.floor(answered.length / 2)]?.toFixed(0)} ms, max ${answered.at(-1)?.toFixed(0)} ms), ` +
        `${latencies.length - answered.length - 1} timed out; ${closed / 2} connections closed for MAX_PENDING_REQUESTS`,
    );
    assert.ok(peak - before < RSS_GROWTH_CEILING_MIB, `RSS grew ${(peak - before).toFixed(0)} MiB (ceiling ${RSS_GROWTH_CEILING_MIB})`);
    // Which bound closes the flood's connections is a race: while requests are parsed faster than connections open,
    // MAX_PENDING_REQUESTS closes enough of them that MAX_CONNECTIONS is never reached (the next test holds that one
    // alone). Either way, connections were closed, or the memory could not have stayed bounded.
    const closedAtAccept = /as they were accepted: MAX_CONNECTIONS connections were open/.test(server.output().stdout);
    assert.ok(closedAtAccept || closed > 0, 'connections past MAX_CONNECTIONS or MAX_PENDING_REQUESTS were closed');
    assert.ok((await healthzMs(server.base)) < 1000, '/healthz is prompt after the flood');
  });

  it('MAX_CONNECTIONS=50: the 51st connection is closed as it is accepted, logged once, and one is accepted again once another closes', async () => {
    const server = await serve({ MAX_CONNECTIONS: '50' });
    const held = await openIdle(server.port, 50);
    const [extra] = await openIdle(server.port, 1);
    assert.ok(extra);
    assert.equal(await closedWithin(extra, 2000), true, 'the connection over the limit is closed at once');
    assert.match(server.output().stdout, /closed 1 connection\(s\) as they were accepted: MAX_CONNECTIONS connections were open/);
    for (const socket of held) socket.destroy();
    // The server sees the closes shortly after.
    for (let attempt = 0; attempt < 50; attempt += 1) {
      try {
        await healthzMs(server.base);
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    assert.fail('no connection was accepted after the others closed');
  });

  it('with TLS, connections in their handshake count towards MAX_CONNECTIONS and are cut off after TLS_HANDSHAKE_TIMEOUT_MS', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-bounds-tls-'));
    try {
      const ca = makeCertificateAuthority(dir);
      const certificate = issueServerCertificate(ca, 'bounds');
      const certFile = path.join(dir, 'chain.pem');
      const keyFile = path.join(dir, 'key.pem');
      fs.writeFileSync(certFile, certificate.chain);
      fs.writeFileSync(keyFile, certificate.key, { mode: 0o600 });
      const server = await serve({ TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile, MAX_CONNECTIONS: '20', TLS_HANDSHAKE_TIMEOUT_MS: '1000' }, { ca: ca.root });
      // A partial ClientHello: a record header announcing more than is ever sent.
      const silent = await openIdle(server.port, 20);
      for (const socket of silent) socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]));
      const [extra] = await openIdle(server.port, 1);
      assert.ok(extra);
      assert.equal(await closedWithin(extra, 500), true, 'a connection over the limit is closed while the others are in their handshake');
      const cutOff = await Promise.all(silent.map((socket) => closedWithin(socket, 4000)));
      assert.deepEqual(new Set(cutOff), new Set([true]), 'every stalled handshake is cut off within the timeout');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
