import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { METHODS } from 'node:http';
import { before, describe, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { PostgresStore } from '../../src/storage/postgres/postgres-store.js';
import type { CreateOutcome } from '../../src/storage/plant-store.js';
import type { Plant } from '../../src/plant.js';
import { buildTestApp, startTestApp, useTestApp, type TestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { DATABASES, postgresDatabase, sqliteDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { parsePrometheusText, type Exposition } from '../helpers/prometheus.js';
import { newToken } from '../helpers/tokens.js';

stopPostgresAfterAll();

/** A token of the app's database that holds metrics:read (the test apps' tokens hold every scope). */
const scrapers = new WeakMap<FastifyInstance, Record<string, string>>();

async function scrape(app: FastifyInstance): Promise<Exposition> {
  const response = await app.inject({ method: 'GET', url: '/metrics', headers: scrapers.get(app) ?? {} });
  assert.equal(response.statusCode, 200, response.body);
  assert.equal(response.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
  return parsePrometheusText(response.body);
}

/** How much each series moved between two scrapes (a series absent before counts from 0). */
function delta(before: Exposition, after: Exposition, name: string, labels: Record<string, string> = {}): number {
  const now = after.value(name, labels);
  assert.notEqual(now, undefined, `${name}${JSON.stringify(labels)} is exposed`);
  return (now as number) - (before.value(name, labels) ?? 0);
}

const creates = (outcome: string) => ['plantstore_creates_total', { outcome }] as const;

for (const database of DATABASES) {
  describe(`GET /metrics on ${database.kind}`, () => {
    // No periodic token reload during a test (reloads are counted); one batch commits at a time on PostgreSQL too;
    // every scrape renders anew, so that two scrapes around a request tell what it changed.
    const t = useTestApp(database.create, { TOKEN_CACHE_MS: '60000', PG_POOL_SIZE: '2', METRICS_CACHE_MS: '0' });
    let nextId = 1;
    const create = (id: number, name: string, app: TestApp = t) =>
      app.app.inject({ method: 'POST', url: '/plants', headers: app.headers, payload: JSON.stringify({ id, name }) });

    before(() => {
      scrapers.set(t.app, { authorization: `Bearer ${t.token}` });
    });

    it('answers a token holding metrics:read, in Prometheus text, with the process and runtime metrics prom-client collects', async () => {
      const exposition = await scrape(t.app);
      const types: Array<[string, string]> = [
        ['process_resident_memory_bytes', 'gauge'],
        ['process_cpu_seconds_total', 'counter'],
        ['nodejs_eventloop_lag_seconds', 'gauge'],
        ['nodejs_heap_size_used_bytes', 'gauge'],
        ['nodejs_gc_duration_seconds', 'histogram'],
        ['http_request_duration_seconds', 'histogram'],
        ['plantstore_creates_total', 'counter'],
        ['plantstore_write_queue_depth', 'gauge'],
        ['plantstore_commit_batch_rows', 'histogram'],
        ['plantstore_commit_duration_seconds', 'histogram'],
        ['plantstore_storage_errors_total', 'counter'],
        ['plantstore_token_cache_reloads_total', 'counter'],
      ];
      for (const [name, type] of types) assert.equal(exposition.families.get(name)?.type, type, name);
      assert.ok((exposition.value('process_resident_memory_bytes') ?? 0) > 0);
    });

    it('counts creates by outcome, and times them under the route template: 3 created, 1 replayed, 1 conflict', async () => {
      const before = await scrape(t.app);
      const first = nextId;
      for (let i = 0; i < 3; i += 1) assert.equal((await create(nextId++, 'Fern')).statusCode, 200);
      assert.equal((await create(first, 'Fern')).statusCode, 200);
      assert.equal((await create(first, 'Ivy')).statusCode, 409);
      const read = await t.app.inject({ method: 'GET', url: `/plants/${first}`, headers: t.headers });
      assert.equal(read.statusCode, 200);
      const after = await scrape(t.app);

      assert.equal(delta(before, after, ...creates('created')), 3);
      assert.equal(delta(before, after, ...creates('replayed')), 1);
      assert.equal(delta(before, after, ...creates('conflict')), 1);
      assert.equal(delta(before, after, ...creates('refused')), 0);
      const requests = (route: string, method: string, status: string) =>
        delta(before, after, 'http_request_duration_seconds_count', { method, route, status_code: status });
      assert.equal(requests('/plants', 'POST', '200'), 4);
      assert.equal(requests('/plants', 'POST', '409'), 1);
      assert.equal(requests('/plants/{id}', 'GET', '200'), 1);
      // One create at a time: each was a batch of one row.
      assert.equal(delta(before, after, 'plantstore_commit_batch_rows_count'), 5);
      assert.equal(delta(before, after, 'plantstore_commit_batch_rows_sum'), 5);
      assert.equal(delta(before, after, 'plantstore_commit_duration_seconds_count'), 5);
      assert.ok(delta(before, after, 'plantstore_commit_duration_seconds_sum') > 0);
    });

    it('resolves sub-millisecond durations: its buckets start at 0.1 ms, not 5 ms', async () => {
      const exposition = await scrape(t.app);
      const bounds = exposition.families
        .get('http_request_duration_seconds')
        ?.samples.filter((sample) => sample.name.endsWith('_bucket') && sample.labels.route === '/plants')
        .map((sample) => Number(sample.labels.le));
      assert.ok(bounds?.includes(0.0001) && bounds.includes(0.0005) && bounds.includes(0.001) && bounds.includes(10), String(bounds));
    });

    it('times a request no route matched under one fixed label, never its path', async () => {
      const before = await scrape(t.app);
      const response = await t.app.inject({ method: 'POST', url: '/no/such/path-4711?x=1', payload: 'x' });
      assertErrorRecord(response, 404);
      const methodNotAllowed = await t.app.inject({ method: 'PUT', url: '/plants/4711' });
      assertErrorRecord(methodNotAllowed, 405);
      const deleteAll = await t.app.inject({ method: 'DELETE', url: '/plants' });
      assertErrorRecord(deleteAll, 405);
      const after = await scrape(t.app);
      assert.equal(delta(before, after, 'http_request_duration_seconds_count', { method: 'POST', route: '(unmatched)', status_code: '404' }), 1);
      // PUT is a method no route takes: labelled "other", as every such method is; DELETE is one some route takes.
      assert.equal(delta(before, after, 'http_request_duration_seconds_count', { method: 'other', route: '/plants/{id}', status_code: '405' }), 1);
      assert.equal(delta(before, after, 'http_request_duration_seconds_count', { method: 'DELETE', route: '/plants', status_code: '405' }), 1);
      const labelValues = [...after.families.values()].flatMap((family) => family.samples.flatMap((sample) => Object.values(sample.labels)));
      assert.ok(!labelValues.some((value) => value.includes('4711')), 'no label carries a path or id a client sent');
    });

    it('keeps its series bounded whatever paths and methods clients send: every Node method on every path adds no more than the routed methods and "other"', async () => {
      const paths = ['/', '/healthz', '/readyz', '/openapi.json', '/metrics', '/plants', '/plants/1', '/docs', '/no/such/path'];
      const flood = async (round: number) => {
        for (const method of METHODS) {
          // CONNECT is answered by the server itself, never routed; light-my-request cannot send it either.
          if (method === 'CONNECT') continue;
          for (const path of [...paths, `/unknown-${round}-${method}`, `/plants/${round}/${method}`]) {
            await t.app.inject({ method: method as 'GET', url: path });
          }
        }
      };
      await flood(1);
      const first = await scrape(t.app);
      const series = (exposition: Exposition) => exposition.families.get('http_request_duration_seconds')?.samples.length ?? 0;
      const methodLabels = new Set(first.families.get('http_request_duration_seconds')?.samples.map((sample) => sample.labels.method));
      assert.deepEqual([...methodLabels].sort(), ['DELETE', 'GET', 'HEAD', 'POST', 'other'], 'the method label takes the routed methods and "other" only');
      // A second round of other paths and the same methods adds nothing: the exposition no longer grows with traffic.
      await flood(2);
      const second = await scrape(t.app);
      assert.equal(series(second), series(first));
    });

    it('counts a refused create (nothing stored) as refused', async () => {
      const before = await scrape(t.app);
      const createPlants = t.store.plants.create.bind(t.store.plants);
      t.store.plants.create = () => Promise.reject(new StorageUnavailableError());
      try {
        assertErrorRecord(await create(nextId++, 'Fern'), 503);
      } finally {
        t.store.plants.create = createPlants;
      }
      const after = await scrape(t.app);
      assert.equal(delta(before, after, ...creates('refused')), 1);
      assert.equal(delta(before, after, ...creates('created')), 0);
      assert.equal(delta(before, after, 'http_request_duration_seconds_count', { method: 'POST', route: '/plants', status_code: '503' }), 1);
    });

    it('reports the write queue depth when scraped: the creates waiting behind a batch that is committing', async () => {
      assert.equal((await scrape(t.app)).value('plantstore_write_queue_depth'), 0);
      const createPlants = t.store.plants.create.bind(t.store.plants);
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let committing!: () => void;
      const batchStarted = new Promise<void>((resolve) => (committing = resolve));
      t.store.plants.create = async (plants: readonly Plant[]): Promise<CreateOutcome[]> => {
        t.store.plants.create = createPlants;
        committing();
        await released;
        return createPlants(plants);
      };
      const first = create(nextId++, 'Fern');
      await batchStarted;
      const waiting = [create(nextId++, 'Fern'), create(nextId++, 'Fern')];
      // Each request reaches the queue after a few turns of the event loop (authentication, body, validation).
      for (let turn = 0; turn < 1000 && t.services.writes.depth < 2; turn += 1) await new Promise((resolve) => setImmediate(resolve));
      try {
        assert.equal((await scrape(t.app)).value('plantstore_write_queue_depth'), 2);
      } finally {
        release();
      }
      for (const response of await Promise.all([first, ...waiting])) assert.equal(response.statusCode, 200);
      assert.equal((await scrape(t.app)).value('plantstore_write_queue_depth'), 0);
    });

    it('counts token cache reloads by result: an unknown token reloads the tokens once', async () => {
      const unknown = { authorization: 'Bearer plst_unknown-token-for-metrics' };
      const before = await scrape(t.app);
      assertErrorRecord(await t.app.inject({ method: 'GET', url: '/plants', headers: unknown }), 401);
      const allTokens = t.store.tokens.all.bind(t.store.tokens);
      t.store.tokens.all = () => Promise.reject(new StorageUnavailableError());
      try {
        assertErrorRecord(await t.app.inject({ method: 'GET', url: '/plants', headers: unknown }), 503);
      } finally {
        t.store.tokens.all = allTokens;
      }
      const after = await scrape(t.app);
      assert.equal(delta(before, after, 'plantstore_token_cache_reloads_total', { result: 'success' }), 1);
      assert.equal(delta(before, after, 'plantstore_token_cache_reloads_total', { result: 'failure' }), 1);
    });

    it(`reports the PostgreSQL pool's connections ${database.kind === 'postgres' ? 'as gauges' : 'not at all (there is no pool)'}`, async () => {
      const exposition = await scrape(t.app);
      const names = ['plantstore_postgres_pool_connections', 'plantstore_postgres_pool_idle_connections', 'plantstore_postgres_pool_waiting_queries'];
      if (database.kind === 'sqlite') {
        for (const name of names) assert.equal(exposition.families.get(name), undefined, name);
        return;
      }
      for (const name of names) assert.equal(exposition.families.get(name)?.type, 'gauge', name);
      const [total, idle, waiting] = names.map((name) => exposition.value(name) as number);
      assert.ok(total !== undefined && total >= 1 && total <= 2, `total ${total}`);
      assert.ok(idle !== undefined && idle <= total, `idle ${idle}`);
      assert.equal(waiting, 0);
    });

    it('keeps the metrics of each app apart: another app on the same database counts only its own', async () => {
      const other = await startTestApp(t.databaseUrl, { TOKEN_CACHE_MS: '60000', PG_POOL_SIZE: '2', METRICS_CACHE_MS: '0' });
      scrapers.set(other.app, { authorization: `Bearer ${other.token}` });
      try {
        const mine = await scrape(t.app);
        const theirsBefore = await scrape(other.app);
        assert.equal(theirsBefore.value(...creates('created')), 0);
        assert.equal((await create(nextId++, 'Fern', other)).statusCode, 200);
        assert.equal(delta(theirsBefore, await scrape(other.app), ...creates('created')), 1);
        assert.equal(delta(mine, await scrape(t.app), ...creates('created')), 0);
      } finally {
        await other.close();
      }
    });
  });
}

describe('plantstore_storage_errors_total', () => {
  it('counts a SQLite write that found the database locked past its wait as kind="locked"', async (context) => {
    const t = await buildTestApp(context, sqliteDatabase, { METRICS_CACHE_MS: '0' });
    scrapers.set(t.app, { authorization: `Bearer ${t.token}` });
    const holder = new DatabaseSync(t.databaseUrl.slice('sqlite:'.length));
    try {
      const before = await scrape(t.app);
      // Another process's write transaction: the readiness heartbeat waits 1 s for it, then gives up.
      holder.exec('BEGIN IMMEDIATE');
      assertErrorRecord(await t.app.inject({ method: 'GET', url: '/readyz' }), 503);
      holder.exec('ROLLBACK');
      const after = await scrape(t.app);
      assert.equal(delta(before, after, 'plantstore_storage_errors_total', { kind: 'locked' }), 1);
      assert.equal(delta(before, after, 'plantstore_storage_errors_total', { kind: 'other' }), 0);
    } finally {
      holder.close();
    }
  });

  it('counts a PostgreSQL statement cut off by its timeout as kind="timeout"', async (context) => {
    // The real timeouts, shortened: a lock held elsewhere makes the heartbeat's statement time out. The scraper's
    // token is the test app's, stored before the services start, so that their first load has it: a token looked up
    // later would be one more statement under the shortened timeout.
    const t = await buildTestApp(context, postgresDatabase, { METRICS_CACHE_MS: '0' }, {
      openStore: ({ database }) => {
        if (database.kind !== 'postgres') throw new Error('a PostgreSQL statement timeout needs PostgreSQL');
        return PostgresStore.open(database, { connectMs: 2000, queryMs: 300 });
      },
    });
    scrapers.set(t.app, { authorization: `Bearer ${t.token}` });
    const holder = new pg.Client({ connectionString: t.databaseUrl });
    await holder.connect();
    try {
      const before = await scrape(t.app);
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE plantstore_heartbeat IN ACCESS EXCLUSIVE MODE');
      assertErrorRecord(await t.app.inject({ method: 'GET', url: '/readyz' }), 503);
      await holder.query('ROLLBACK');
      const after = await scrape(t.app);
      assert.equal(delta(before, after, 'plantstore_storage_errors_total', { kind: 'timeout' }), 1);
      assert.equal(delta(before, after, 'plantstore_storage_errors_total', { kind: 'other' }), 0);
    } finally {
      await holder.end();
    }
  });
});

describe('who may scrape, and how often it renders', () => {
  // A long cache, so that the test sees it; AUTH_FAILURE_LIMIT high enough that refusals here stay 401/403.
  const t = useTestApp(sqliteDatabase, { METRICS_CACHE_MS: '60000', AUTH_FAILURE_LIMIT: '1000' });

  it('refuses a scrape without a token (401) and with a token that lacks metrics:read (403)', async () => {
    assertErrorRecord(await t.app.inject({ method: 'GET', url: '/metrics' }), 401);
    const token = generateToken();
    await t.store.tokens.add(newToken(`plants-only-${randomUUID()}`, hashToken(token), { scopes: ['plants:read', 'plants:create', 'plants:delete'] }));
    const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${token}` } });
    assertErrorRecord(response, 403, /lacks the metrics:read scope/);
    assert.equal(response.headers['www-authenticate'], 'Bearer realm="plantstore", error="insufficient_scope", scope="metrics:read"');
  });

  it('answers a token holding metrics:read alone', async () => {
    const token = generateToken();
    await t.store.tokens.add(newToken(`scraper-${randomUUID()}`, hashToken(token), { scopes: ['metrics:read'] }));
    const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${token}` } });
    assert.equal(response.statusCode, 200);
    assert.ok(parsePrometheusText(response.body).families.has('plantstore_creates_total'));
  });

  it('renders at most once per METRICS_CACHE_MS: scrapes meanwhile answer the same text, a create since included', async () => {
    const headers = { authorization: `Bearer ${t.token}` };
    const first = await t.app.inject({ method: 'GET', url: '/metrics', headers });
    const created = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: '{"id":1,"name":"Fern"}' });
    assert.equal(created.statusCode, 200);
    const concurrent = await Promise.all(Array.from({ length: 20 }, () => t.app.inject({ method: 'GET', url: '/metrics', headers })));
    for (const response of concurrent) assert.equal(response.body, first.body);
    assert.equal(parsePrometheusText(first.body).value('plantstore_creates_total', { outcome: 'created' }), 0);
  });
});

describe('METRICS=off', () => {
  const t = useTestApp(sqliteDatabase, { METRICS: 'off' });

  it('removes the route: GET /metrics is a 404 Error record, and /openapi.json does not describe it', async () => {
    assertErrorRecord(await t.app.inject({ method: 'GET', url: '/metrics' }), 404, /^no route for GET \/metrics$/);
    const document = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, unknown> };
    assert.equal(document.paths['/metrics'], undefined);
    assert.ok(document.paths['/healthz']);
    assert.equal(t.services.metrics, null);
    // Nothing else changes.
    const response = await t.app.inject({ method: 'POST', url: '/plants', headers: t.headers, payload: '{"id":1,"name":"Fern"}' });
    assert.equal(response.statusCode, 200);
  });
});

describe('the Prometheus text reader of these tests', () => {
  const valid = '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 2\n\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 3.5\nh_count 2\n';

  it('reads valid text', () => {
    const exposition = parsePrometheusText(valid);
    assert.equal(exposition.value('a_total', { x: '1' }), 2);
    assert.equal(exposition.value('h_count'), 2);
    assert.equal(exposition.families.get('h')?.type, 'histogram');
  });

  const broken: Array<[string, string]> = [
    ['no final newline', valid.slice(0, -1)],
    ['a sample before its TYPE', 'b 1\n'],
    ['a malformed value', '# TYPE b gauge\nb one\n'],
    ['an unquoted label value', '# TYPE b gauge\nb{x=1} 1\n'],
    ['a bad metric name', '# TYPE 1b gauge\n1b 1\n'],
    ['a repeated series', '# TYPE b gauge\nb 1\nb 2\n'],
    ['a family split in two', '# TYPE b gauge\nb{x="1"} 1\n# TYPE c gauge\nc 1\nb{x="2"} 1\n'],
    ['buckets that are not cumulative', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'],
    ['a +Inf bucket that is not the count', '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 1\n'],
    ['an unknown type', '# TYPE b meter\nb 1\n'],
  ];
  for (const [what, text] of broken) {
    it(`refuses ${what}`, () => {
      assert.throws(() => parsePrometheusText(text));
    });
  }
});
