/**
 * TRUST_PROXY: X-Forwarded-For and X-Forwarded-Proto are believed only from the proxies it lists. In-process, with
 * app.inject's remoteAddress standing for the peer of the connection.
 *
 * What reads them: request.ip is the `remoteAddress` of the debug request lines; request.protocol is read by nothing
 * of plantstore's today (links are relative), so it is observed with a hook. The rate limiter keys by token name,
 * not by address, so no header moves a client to another bucket: that is checked too.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { createLogger } from '../../src/observability/log.js';
import { buildTestApp } from '../helpers/app.js';
import { sqliteDatabase } from '../helpers/databases.js';

interface Seen {
  readonly ip: string;
  readonly protocol: string;
  /** The remoteAddress of the request's 'incoming request' log line. */
  readonly logged: unknown;
}

interface ProxiedApp {
  readonly token: string;
  /** What the app took the client's address and protocol to be, for a request from `peer` with these headers. */
  request(peer: string, headers: Record<string, string>, url?: string): Promise<Seen & { status: number }>;
}

/** An app for one test, on a database of its own, logging at debug (the request lines) into memory. */
async function proxiedApp(context: TestContext, env: Record<string, string>): Promise<ProxiedApp> {
  const lines: Array<Record<string, unknown>> = [];
  const seen = new Map<string, { ip: string; protocol: string }>();
  const { app, token } = await buildTestApp(context, sqliteDatabase, env, {
    log: createLogger({ logLevel: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) }),
    beforeReady: (built) =>
      built.addHook('onResponse', (request, _reply, done) => {
        seen.set(request.id, { ip: request.ip, protocol: request.protocol });
        done();
      }),
  });
  let next = 0;
  return {
    token,
    async request(peer, headers, url = '/healthz') {
      next += 1;
      const id = `trust-proxy-${next}`;
      const response = await app.inject({ method: 'GET', url, remoteAddress: peer, headers: { 'x-request-id': id, ...headers } });
      const incoming = lines.find((line) => line.reqId === id && line.msg === 'incoming request');
      const observed = seen.get(id);
      assert.ok(observed && incoming, `request ${id} was seen and logged`);
      return { status: response.statusCode, ...observed, logged: (incoming.req as { remoteAddress?: unknown }).remoteAddress };
    },
  };
}

const FORWARDED = { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' };

describe('TRUST_PROXY', () => {
  it('is off by default: X-Forwarded-For and -Proto are ignored, whoever sends them', async (context) => {
    const proxied = await proxiedApp(context, {});
    for (const peer of ['127.0.0.1', '10.1.2.3']) {
      const seen = await proxied.request(peer, FORWARDED);
      assert.deepEqual(seen, { status: 200, ip: peer, protocol: 'http', logged: peer });
    }
  });

  it('believes the headers from a listed proxy only, in the request log and the request\'s protocol', async (context) => {
    const proxied = await proxiedApp(context, { TRUST_PROXY: '10.0.0.0/8, 192.0.2.1' });
    for (const proxy of ['10.1.2.3', '192.0.2.1', '::ffff:10.9.9.9']) {
      assert.deepEqual(await proxied.request(proxy, FORWARDED), { status: 200, ip: '203.0.113.7', protocol: 'https', logged: '203.0.113.7' }, proxy);
    }
    for (const stranger of ['192.0.2.2', '127.0.0.1', '11.0.0.1']) {
      assert.deepEqual(await proxied.request(stranger, FORWARDED), { status: 200, ip: stranger, protocol: 'http', logged: stranger }, stranger);
    }
    // A chain: the client is the nearest address not a trusted proxy, so what a client wrote at the far end of
    // X-Forwarded-For is not believed past an untrusted hop.
    const chained = await proxied.request('10.1.2.3', { 'x-forwarded-for': '198.51.100.1, 203.0.113.7, 10.4.4.4' });
    assert.equal(chained.ip, '203.0.113.7');
    assert.equal(chained.logged, '203.0.113.7');
  });

  it('takes loopback to mean 127.0.0.0/8 and ::1', async (context) => {
    const proxied = await proxiedApp(context, { TRUST_PROXY: 'loopback' });
    for (const proxy of ['127.0.0.1', '127.8.8.8', '::1']) {
      assert.equal((await proxied.request(proxy, FORWARDED)).ip, '203.0.113.7', proxy);
    }
    assert.equal((await proxied.request('10.1.2.3', FORWARDED)).ip, '10.1.2.3');
  });

  it('does not change whom the rate limiter counts: it keys by token, so a forwarded address earns no new bucket', async (context) => {
    const proxied = await proxiedApp(context, { TRUST_PROXY: 'loopback', RATE_LIMIT_MAX: '1', RATE_LIMIT_WINDOW_MS: '3600000' });
    const authorization = `Bearer ${proxied.token}`;
    const first = await proxied.request('127.0.0.1', { authorization, 'x-forwarded-for': '203.0.113.1' }, '/plants');
    assert.equal(first.status, 200);
    const second = await proxied.request('127.0.0.1', { authorization, 'x-forwarded-for': '203.0.113.2' }, '/plants');
    assert.equal(second.ip, '203.0.113.2', 'the forwarded address was believed');
    assert.equal(second.status, 429, 'and the same token was still limited');
  });
});
