import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { CONFIG_VARIABLES, ConfigError } from '../../src/config/variables.js';
import { AUTO_WORKER_MEMORY_BYTES, DEFAULT_TLS_CIPHERS, loadConfig, type HostFacts } from '../../src/config/config.js';

describe('configuration', () => {
  it('has working defaults: SQLite under ./data, 127.0.0.1:8080, 16 KiB bodies', () => {
    const config = loadConfig({}, '/srv/app');
    assert.deepEqual(config.database, { kind: 'sqlite', path: path.resolve('/srv/app/data/plantstore.db') });
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 8080);
    assert.equal(config.limits.bodyBytes, 16384);
    assert.equal(config.rateLimit, null);
  });

  it('is frozen, all the way down', () => {
    const config = loadConfig({});
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.limits));
    assert.throws(() => {
      (config.limits as { bodyBytes: number }).bodyBytes = 1;
    }, TypeError);
  });

  it('selects PostgreSQL for postgres:// and postgresql:// URLs', () => {
    for (const url of ['postgres://u:p@db:5432/plants', 'postgresql://u@db/plants?sslmode=require']) {
      assert.deepEqual(loadConfig({ DATABASE_URL: url, PG_POOL_SIZE: '3' }).database, { kind: 'postgres', url, poolSize: 3 });
    }
  });

  it('reads sqlite: URLs as relative or absolute files', () => {
    assert.deepEqual(loadConfig({ DATABASE_URL: 'sqlite:///var/lib/p.db' }).database, { kind: 'sqlite', path: '/var/lib/p.db' });
    assert.deepEqual(loadConfig({ DATABASE_URL: 'sqlite:rel/p.db' }, '/x').database, { kind: 'sqlite', path: '/x/rel/p.db' });
  });

  it('keeps metrics on unless METRICS=off', () => {
    assert.equal(loadConfig({}).metrics, true);
    assert.equal(loadConfig({ METRICS: 'on' }).metrics, true);
    assert.equal(loadConfig({ METRICS: ' off ' }).metrics, false);
  });

  it('bounds the instance by default: 2,048 connections whatever their addresses, 4,096 waiting, 512 feed streams a token and an address, 1,024 pending requests, 3 s TLS handshakes, 60 failed authentications a minute, metrics rendered once a second', () => {
    const config = loadConfig({});
    assert.equal(config.http.maxConnections, 2048);
    assert.deepEqual([config.feed.streamsPerToken, config.feed.streamsPerAddress], [512, 512]);
    assert.equal(config.http.maxQueuedConnections, 4096);
    assert.equal(config.http.maxPendingRequests, 1024);
    assert.equal(config.http.tlsHandshakeTimeoutMs, 3000);
    assert.equal(config.authFailureLimit, 60);
    assert.equal(config.metricsCacheMs, 1000);
    const set = loadConfig({ MAX_CONNECTIONS: '5000', MAX_PENDING_REQUESTS: '99', TLS_HANDSHAKE_TIMEOUT_MS: '500', AUTH_FAILURE_LIMIT: '0', METRICS_CACHE_MS: '0' });
    assert.deepEqual([set.http.maxConnections, set.http.maxPendingRequests, set.http.tlsHandshakeTimeoutMs, set.authFailureLimit, set.metricsCacheMs], [5000, 99, 500, null, 0]);
    assert.throws(() => loadConfig({ MAX_CONNECTIONS: '0' }), /MAX_CONNECTIONS: must be between 1 and/);
    assert.throws(() => loadConfig({ MAX_PENDING_REQUESTS: 'lots' }), /MAX_PENDING_REQUESTS: must be a whole number/);
    assert.equal(loadConfig({ MAX_QUEUED_CONNECTIONS: '0' }).http.maxQueuedConnections, 0);
    assert.throws(() => loadConfig({ MAX_QUEUED_CONNECTIONS: '-1' }), /MAX_QUEUED_CONNECTIONS: must be a whole number/);
  });

  it('turns rate limiting on with RATE_LIMIT_MAX, the burst defaulting to it', () => {
    assert.deepEqual(loadConfig({ RATE_LIMIT_MAX: '5' }).rateLimit, { max: 5, windowMs: 1000, burst: 5 });
    assert.deepEqual(loadConfig({ RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_MS: '60000', RATE_LIMIT_BURST: '20' }).rateLimit, {
      max: 5,
      windowMs: 60000,
      burst: 20,
    });
  });

  for (const [value, problem] of [
    ['0', /between 1 and/],
    ['-3', /whole number/],
    ['2.5', /whole number/],
    ['many', /whole number/],
  ] as const) {
    it(`refuses RATE_LIMIT_BURST=${value} with a message naming the variable`, () => {
      assert.throws(
        () => loadConfig({ RATE_LIMIT_MAX: '5', RATE_LIMIT_BURST: value }),
        (error: unknown) => error instanceof ConfigError && error.variable === 'RATE_LIMIT_BURST' && error.message.startsWith('RATE_LIMIT_BURST: ') && problem.test(error.message),
      );
    });
  }

  const bad: Array<[string, string, RegExp]> = [
    ['PORT', 'eighty', /whole number/],
    ['PORT', '70000', /between 0 and 65535/],
    ['DATABASE_URL', 'mysql://x', /must start with sqlite:/],
    ['DATABASE_URL', 'sqlite::memory:', /not durable/],
    ['LOG_LEVEL', 'loud', /must be one of/],
    ['BODY_LIMIT_BYTES', '-1', /whole number/],
    ['WRITE_QUEUE_LIMIT', '0', /between 1 and/],
    ['TAG_MAX_LENGTH', '601', /between 1 and 600/],
    ['METRICS', 'yes', /must be on or off, got "yes"/],
    ['METRICS', 'OFF', /must be on or off/],
    ['WEBHOOK_RETRY_SCHEDULE', '5s,soon', /comma-separated durations.*"soon" is not one/],
    ['WEBHOOK_RETRY_SCHEDULE', '5s,,5m', /"" is not one/],
    ['WEBHOOK_RETRY_SCHEDULE', '0ms', /"0ms" is not one/],
    ['WEBHOOK_TIMEOUT_MS', '0', /between 1 and/],
    ['WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'yes', /true or false/],
    ['WEBHOOK_RETENTION', '7 days', /must be a duration/],
    ['WEBHOOK_MAX_IN_FLIGHT', '0', /between 1 and/],
    ['WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION', 'many', /whole number/],
    ['WEBHOOK_SECRET_GRACE', '400d', /between 0 ms and 366 days/],
  ];
  const postgresUrl = 'postgres://u:p@db:5432/plants';

  it('serves plain HTTP unless both TLS files are named, read relative to the working directory', () => {
    assert.equal(loadConfig({}).tls, null);
    assert.equal(loadConfig({ TLS_CERT_FILE: ' ', TLS_KEY_FILE: '' }).tls, null);
    assert.deepEqual(loadConfig({ TLS_CERT_FILE: 'tls/chain.pem', TLS_KEY_FILE: '/etc/plantstore/key.pem' }, '/srv/app').tls, {
      certFile: '/srv/app/tls/chain.pem',
      keyFile: '/etc/plantstore/key.pem',
      policy: { minVersion: 'TLSv1.2', ciphers: DEFAULT_TLS_CIPHERS },
    });
  });

  it('serves TLS 1.2 with ECDHE and AEAD suites only, and TLS 1.3, unless TLS_MIN_VERSION or TLS_CIPHERS say otherwise', () => {
    const files = { TLS_CERT_FILE: 'chain.pem', TLS_KEY_FILE: 'key.pem' };
    for (const suite of DEFAULT_TLS_CIPHERS.split(':')) assert.match(suite, /^ECDHE-(ECDSA|RSA)-(AES\d+-GCM-SHA\d+|CHACHA20-POLY1305)$/);
    assert.deepEqual(loadConfig({ ...files, TLS_MIN_VERSION: 'TLSv1.3', TLS_CIPHERS: 'AES128-SHA' }).tls?.policy, { minVersion: 'TLSv1.3', ciphers: 'AES128-SHA' });
    for (const version of ['TLSv1', 'TLSv1.1', '1.2', 'tls1.3']) {
      assert.throws(() => loadConfig({ ...files, TLS_MIN_VERSION: version }), (error: unknown) => error instanceof ConfigError && error.variable === 'TLS_MIN_VERSION');
    }
    assert.throws(
      () => loadConfig({ ...files, TLS_CIPHERS: 'NO-SUCH-SUITE' }),
      (error: unknown) => error instanceof ConfigError && error.variable === 'TLS_CIPHERS' && /NO-SUCH-SUITE/.test(error.message),
    );
  });

  for (const [given, missing] of [
    ['TLS_CERT_FILE', 'TLS_KEY_FILE'],
    ['TLS_KEY_FILE', 'TLS_CERT_FILE'],
  ] as const) {
    it(`refuses ${given} without ${missing}, naming both`, () => {
      assert.throws(
        () => loadConfig({ [given]: 'some.pem' }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.variable === missing &&
          error.message === `${missing}: is not set but ${given} is: set both TLS_CERT_FILE and TLS_KEY_FILE to serve HTTPS, or neither`,
      );
    });
  }

  it('trusts no proxy unless TRUST_PROXY lists some; Fastify takes every list it accepts', () => {
    assert.deepEqual(loadConfig({}).trustProxy, []);
    assert.deepEqual(loadConfig({ TRUST_PROXY: ' ' }).trustProxy, []);
    const lists: Array<[string, string[]]> = [
      ['loopback', ['loopback']],
      ['10.0.0.7', ['10.0.0.7']],
      [' 10.0.0.0/8 , 192.168.1.0/24,loopback ', ['10.0.0.0/8', '192.168.1.0/24', 'loopback']],
      ['::1,fd00::/8,2001:db8::/128', ['::1', 'fd00::/8', '2001:db8::/128']],
      ['::ffff:10.0.0.1,0.0.0.0/1,128.0.0.0/1', ['::ffff:10.0.0.1', '0.0.0.0/1', '128.0.0.0/1']],
    ];
    for (const [raw, expected] of lists) {
      const { trustProxy } = loadConfig({ TRUST_PROXY: raw });
      assert.deepEqual(trustProxy, expected, raw);
      assert.ok(Object.isFrozen(trustProxy));
      assert.doesNotThrow(() => Fastify({ trustProxy: [...trustProxy] }), raw);
    }
  });

  // The value, and the entry the message must name.
  const badProxies: Array<[string, string]> = [
    ['yes', 'yes'],
    ['*', '*'],
    ['localhost', 'localhost'],
    ['10.0.0.0/0', '10.0.0.0/0'],
    ['10.0.0.0/33', '10.0.0.0/33'],
    ['::/129', '::/129'],
    ['10.0.0.0/8/8', '10.0.0.0/8/8'],
    ['10.0.0.0/255.0.0.0', '10.0.0.0/255.0.0.0'],
    ['10.0.0.0/', '10.0.0.0/'],
    ['127.1', '127.1'],
    ['10.0.0.256', '10.0.0.256'],
    ['fe80::1%eth0', 'fe80::1%eth0'],
    ['10.0.0.1,', ''],
    ['10.0.0.1, ,10.0.0.2', ''],
    ['loopback,10.0.0.x', '10.0.0.x'],
  ];
  for (const [value, entry] of badProxies) {
    it(`refuses TRUST_PROXY=${JSON.stringify(value)}, naming the variable and the entry`, () => {
      assert.throws(
        () => loadConfig({ TRUST_PROXY: value }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.variable === 'TRUST_PROXY' &&
          error.message.startsWith('TRUST_PROXY: must be a comma-separated list of proxy addresses') &&
          error.message.endsWith(`${JSON.stringify(entry)} is not one`),
      );
    });
  }

  // PG_POOL_SIZE is read only when DATABASE_URL names PostgreSQL.
  const badPoolSizes: Array<[string, RegExp]> = [
    ['0', /between 1 and 1000, got 0/],
    ['1001', /between 1 and 1000, got 1001/],
    ['abc', /whole number, got "abc"/],
    ['1.5', /whole number, got "1.5"/],
  ];
  for (const [value, problem] of badPoolSizes) {
    it(`refuses PG_POOL_SIZE=${value} with a message naming the variable`, () => {
      assert.throws(
        () => loadConfig({ DATABASE_URL: postgresUrl, PG_POOL_SIZE: value }),
        (error: unknown) => error instanceof ConfigError && error.variable === 'PG_POOL_SIZE' && error.message.startsWith('PG_POOL_SIZE: ') && problem.test(error.message),
      );
    });
  }

  it('reads the webhook settings: Standard Webhooks\' schedule, 10 s, no private networks, 7 days by default', () => {
    const defaults = loadConfig({}).webhooks;
    const [s, m, h] = [1000, 60_000, 3_600_000];
    assert.deepEqual(defaults.retrySchedule, [5 * s, 5 * m, 30 * m, 2 * h, 5 * h, 10 * h, 10 * h, 10 * h, 10 * h, 10 * h, 10 * h]);
    assert.equal(defaults.timeoutMs, 10_000);
    assert.equal(defaults.allowPrivateNetworks, false);
    assert.equal(defaults.retentionMs, 7 * 24 * h);
    assert.equal(defaults.secretGraceMs, 24 * h);
    const given = loadConfig({ WEBHOOK_RETRY_SCHEDULE: ' 50ms, 1s ,2m,1h,1d', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETENTION: '0ms' }).webhooks;
    assert.deepEqual(given.retrySchedule, [50, s, 2 * m, h, 24 * h]);
    assert.equal(given.allowPrivateNetworks, true);
    assert.equal(given.retentionMs, 0);
    assert.ok(Object.isFrozen(given.retrySchedule));
  });

  for (const [variable, value, problem] of bad) {
    it(`refuses ${variable}=${value} with a message naming the variable`, () => {
      assert.throws(
        () => loadConfig({ [variable]: value }),
        (error: unknown) => error instanceof ConfigError && error.variable === variable && error.message.startsWith(`${variable}: `) && problem.test(error.message),
      );
    });
  }

  describe('WORKERS', () => {
    const host = (facts: Partial<HostFacts> = {}): HostFacts => ({ cores: 8, memoryBytes: 64 * 1024 ** 3, nodeVersion: '24.0.0', ...facts });
    const workers = (value: string | undefined, facts?: Partial<HostFacts>) =>
      loadConfig(value === undefined ? {} : { WORKERS: value }, '/srv', host(facts)).workers;

    it('is 1 unless set: one thread serves, as without workers', () => {
      assert.equal(workers(undefined), 1);
      assert.equal(workers(''), 1);
      assert.equal(workers(' 3 '), 3);
    });

    it('auto is the cores this process may use, at most one per 256 MiB of memory, and never less than 1', () => {
      assert.equal(workers('auto', { cores: 8 }), 8);
      assert.equal(workers('auto', { cores: 8, memoryBytes: 3 * AUTO_WORKER_MEMORY_BYTES + 1 }), 3);
      assert.equal(workers('auto', { cores: 4, memoryBytes: AUTO_WORKER_MEMORY_BYTES - 1 }), 1);
      assert.equal(workers('auto', { cores: 1 }), 1);
    });

    for (const value of ['0', '257', '-1', '2.5', 'all', 'AUTO']) {
      it(`refuses WORKERS=${value} naming the variable and what it takes`, () => {
        assert.throws(
          () => workers(value),
          (error: unknown) => error instanceof ConfigError && error.variable === 'WORKERS' && /from 1 to 256, or auto/.test(error.message),
        );
      });
    }

    it('refuses more than 1 on a Node.js whose servers cannot share a port (before 22.12, 23.0), and allows 1 there', () => {
      for (const nodeVersion of ['22.11.0', '23.0.0', '20.18.1']) {
        assert.throws(
          () => workers('2', { nodeVersion }),
          (error: unknown) => error instanceof ConfigError && error.variable === 'WORKERS' && error.message.includes(nodeVersion),
        );
        assert.equal(workers('1', { nodeVersion }), 1);
      }
      for (const nodeVersion of ['22.12.0', '23.1.0', '24.0.0', '26.1.0']) assert.equal(workers('2', { nodeVersion }), 2);
    });
  });

  it('reads exactly the variables CONFIG_VARIABLES lists, which docs/configuration.md documents in the same order', () => {
    // Values that take every branch: a PostgreSQL URL reads PG_POOL_SIZE, a rate limit reads its window and burst,
    // an OTLP endpoint the rest of the tracing variables.
    const given: Record<string, string> = { DATABASE_URL: postgresUrl, RATE_LIMIT_MAX: '5', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    const asked = new Set<string>();
    const env = new Proxy(given, {
      get(target, name) {
        if (typeof name === 'string') asked.add(name);
        return typeof name === 'string' ? target[name] : undefined;
      },
    });
    loadConfig(env);
    assert.deepEqual([...asked].sort(), [...CONFIG_VARIABLES].sort());

    const page = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/configuration.md'), 'utf8');
    const start = page.indexOf('\n## Variables\n');
    assert.ok(start >= 0, 'docs/configuration.md has a Variables section');
    const end = page.indexOf('\n## ', start + 1);
    const section = page.slice(start, end === -1 ? undefined : end);
    const documented = [...section.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((match) => match[1]);
    assert.deepEqual(documented, [...CONFIG_VARIABLES]);
  });
});
