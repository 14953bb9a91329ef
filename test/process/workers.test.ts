/**
 * WORKERS=2 on each store: an instance of two threads in this process (src/workers/instance.ts: the main thread and
 * one worker thread, both serving) on a real port, each request on a connection of its own so that the kernel
 * spreads them over both (each phase checks from the threads' own metrics that both answered). What holds for one process holds for the instance: a create
 * answered by one worker is a replay or a conflict for the other, /metrics counts the whole instance, a rate limit
 * and a revocation are the instance's, each webhook event is sent once, and a worker that ends is replaced while
 * the instance goes on serving, losing nothing it acknowledged. What only a worker thread does (on SQLite, hand its
 * deletes, its tokens' last uses and its readiness heartbeats to the main thread's writer) is checked on requests
 * the worker answered, told apart from the main thread's by which thread's own metrics counted each (answeredBy).
 */
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { INT64_MAX, INT64_MIN } from '../../src/json/int64.js';
import type { Plant } from '../../src/plant.js';
import type { Store } from '../../src/storage/store.js';
import { loadConfig } from '../../src/config/config.js';
import { generateEventIdPrefix, generateWebhookSecret } from '../../src/webhooks/signature.js';
import { DatabaseSync } from 'node:sqlite';
import { READY_REUSE_MS } from '../../src/health/readiness.js';
import { DATABASES } from '../helpers/databases.js';
import {
  answeredBy,
  freshRequest,
  requestsByWorker,
  startInstance,
  startTestInstance,
  type Answer,
  type RequestLabels,
  type RunningInstance,
  type TestInstance,
} from '../helpers/instance.js';
import { errorRecordProblem } from '../helpers/process.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { newToken } from '../helpers/tokens.js';
import { parsePrometheusText } from '../helpers/prometheus.js';
import { Receiver } from '../helpers/receiver.js';
import { waitFor } from '../helpers/wait.js';

stopPostgresAfterAll();

const plantBody = (id: bigint, name: string, tag?: string) => `{"id":${id},"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`;

/** Runs `phase`, then checks that every thread (the main thread and the worker) answered some of its requests. */
async function onEveryWorker<T>(instance: RunningInstance, phase: () => Promise<T>): Promise<T> {
  const before = await requestsByWorker(instance);
  const result = await phase();
  const after = await requestsByWorker(instance);
  const answered = [...after].map(([slot, count]) => count - (before.get(slot) ?? 0));
  assert.equal(answered.length, 2, 'both threads report');
  assert.ok(
    answered.every((count) => count > 0),
    `both threads answered requests of this phase (${answered.join(' and ')}); with connections spread by the kernel, one getting none is a 1 in 2^(n-1) chance`,
  );
  return result;
}

/** The worker thread's slot: the main thread is slot 0. */
const WORKER = 1;
/** Tries at reaching the worker thread: each new connection reaches it at even odds, so all missing is a 1 in 2^40 chance. */
const ATTEMPTS = 40;

/**
 * Sends `send` (a request on a connection of its own) until the worker thread has answered it once, checking
 * `expect` on every answer, whichever thread wrote it; for requests whose answer does not depend on how often they
 * were sent. Answers the worker's answer.
 */
async function untilTheWorkerAnswers(instance: RunningInstance, labels: RequestLabels, send: () => Promise<Answer>, expect: (answer: Answer) => void): Promise<Answer> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
    const { slot, answer } = await answeredBy(instance, labels, send);
    expect(answer);
    if (slot === WORKER) return answer;
  }
  assert.fail(`the worker thread answered none of ${ATTEMPTS} requests`);
}

function assertErrorAnswer(answer: Answer, status: number, message: string): void {
  assert.equal(answer.status, status, answer.body);
  assert.equal(errorRecordProblem(status, answer.headers['content-type'], answer.body), undefined);
  assert.equal((JSON.parse(answer.body) as { message: string }).message, message);
}

for (const { kind, create } of DATABASES) {
  describe(`WORKERS=2 on ${kind}`, { timeout: 180_000 }, () => {
    const cleanups: Array<() => Promise<void>> = [];
    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup();
    });
    const start = async (env: Record<string, string> = {}, options: Parameters<typeof startTestInstance>[2] = {}): Promise<TestInstance> => {
      const db = await create();
      cleanups.push(() => db.cleanup());
      const t = await startTestInstance(db.url, env, options);
      cleanups.push(() => t.close());
      return t;
    };

    it('stores a create answered by either thread once; the other answers its replay 200 and a different body 409, with the exact id', async () => {
      const t = await start();
      const ids = [1n, 9007199254740993n, INT64_MAX, INT64_MIN, ...Array.from({ length: 16 }, (_, index) => BigInt(index) * 1_000_003n + 7n)];
      await onEveryWorker(t.instance, async () => {
        for (const id of ids) {
          const created = await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(id, `plant ${id}`, 'tag') });
          assert.equal(created.status, 200, created.body);
        }
        for (const id of ids) {
          const replay = await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(id, `plant ${id}`, 'tag') });
          assert.deepEqual([replay.status, JSON.parse(replay.body)], [200, { name: `plant ${id}`, tag: 'tag' }]);
          const conflict = await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(id, 'another name') });
          assert.equal(conflict.status, 409, conflict.body);
          const read = await freshRequest(t.url, { path: `/plants/${id}`, token: t.token });
          assert.equal(read.status, 200);
          assert.match(read.body, new RegExp(`^\\{"id":${id},`), 'the id with all its digits');
        }
      });
      for (const id of ids) assert.deepEqual(await t.store.plants.get(id), { id, name: `plant ${id}`, tag: 'tag' });
    });

    it('answers concurrent creates of one id sent to both threads as one create: one body wins, its copies replay, the other body is 409', async () => {
      const t = await start();
      const id = 424242n;
      const answers = await onEveryWorker(t.instance, () =>
        Promise.all(
          Array.from({ length: 40 }, (_, index) => {
            const name = index % 2 === 0 ? 'even' : 'odd';
            return freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(id, name) }).then((answer) => ({ name, ...answer }));
          }),
        ),
      );
      const stored = (await t.store.plants.get(id)) as Plant;
      assert.ok(stored, 'stored');
      for (const answer of answers) assert.equal(answer.status, answer.name === stored.name ? 200 : 409, `${answer.name}: ${answer.body}`);
    });

    it('counts the whole instance in /metrics, whichever thread answers it', async () => {
      // Every scrape renders anew (in the worker and in the main thread), so each sees every create before it.
      const t = await start({ METRICS_CACHE_MS: '0' });
      const creates = 12;
      await onEveryWorker(t.instance, async () => {
        for (let index = 0; index < creates; index += 1) {
          const answer = await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(BigInt(index + 1), 'counted') });
          assert.equal(answer.status, 200);
        }
        for (let scrape = 0; scrape < 6; scrape += 1) {
          const answer = await freshRequest(t.url, { path: '/metrics', token: t.token });
          assert.equal(answer.status, 200);
          const metrics = parsePrometheusText(answer.body);
          assert.equal(metrics.value('plantstore_creates_total', { outcome: 'created' }), creates);
          assert.equal(metrics.value('http_request_duration_seconds_count', { method: 'POST', route: '/plants', status_code: '200' }), creates);
          const threads = metrics.families.get('nodejs_eventloop_lag_seconds')?.samples.map((sample) => sample.labels['thread']).sort();
          assert.deepEqual(threads, ['main', 'worker-1']);
          if (kind === 'sqlite') {
            // The main thread commits its own creates and the worker's: its commits are the instance's.
            assert.equal(metrics.value('plantstore_commit_batch_rows_sum'), creates);
          }
        }
      });
    });

    it('limits a token per instance, not per thread: RATE_LIMIT_BURST requests pass in all', async () => {
      const t = await start({ RATE_LIMIT_MAX: '1', RATE_LIMIT_WINDOW_MS: '3600000', RATE_LIMIT_BURST: '4' });
      const statuses = await onEveryWorker(t.instance, async () => {
        const answers: number[] = [];
        for (let index = 0; index < 16; index += 1) answers.push((await freshRequest(t.url, { path: '/plants', token: t.token })).status);
        return answers;
      });
      assert.deepEqual(statuses.slice(0, 4), [200, 200, 200, 200]);
      assert.deepEqual(statuses.slice(4), Array<number>(12).fill(429));
    });

    it('holds a token to its scopes and its expiry in every thread', async () => {
      const t = await start();
      const reader = generateToken();
      const expired = generateToken();
      await t.store.tokens.add(newToken('reader', hashToken(reader), { scopes: ['plants:read'] }));
      await t.store.tokens.add(newToken('expired', hashToken(expired), { expiresAt: new Date(Date.now() - 1000) }));
      await onEveryWorker(t.instance, async () => {
        for (let index = 0; index < 8; index += 1) {
          assert.equal((await freshRequest(t.url, { path: '/plants', token: reader })).status, 200);
          const refused = await freshRequest(t.url, { method: 'POST', path: '/plants', token: reader, body: plantBody(BigInt(index + 1), 'not allowed') });
          assert.deepEqual([refused.status, JSON.parse(refused.body)], [403, { error: 403, message: 'this token may not create plants: it lacks the plants:create scope' }]);
          const late = await freshRequest(t.url, { path: '/plants', token: expired });
          assert.deepEqual([late.status, JSON.parse(late.body)], [401, { error: 401, message: 'the token has expired' }]);
        }
      });
      assert.deepEqual(await t.store.plants.list({ limit: 10 }), [], 'nothing was created');
    });

    it('refuses a revoked token in every thread within TOKEN_CACHE_MS', async () => {
      // Its refusals are counted, not throttled: AUTH_FAILURE_LIMIT would answer some of them 429.
      const t = await start({ TOKEN_CACHE_MS: '300', AUTH_FAILURE_LIMIT: '0' });
      await onEveryWorker(t.instance, async () => {
        for (let index = 0; index < 24; index += 1) assert.equal((await freshRequest(t.url, { path: '/plants', token: t.token })).status, 200);
      });
      assert.equal(await t.store.tokens.revoke(t.tokenName), true);
      const revokedAt = performance.now();
      // One cache period, and the reload it starts (a read of the tokens), at most.
      await new Promise((resolve) => setTimeout(resolve, 300 + 200));
      const statuses = await onEveryWorker(t.instance, async () => {
        const answers: number[] = [];
        for (let index = 0; index < 16; index += 1) answers.push((await freshRequest(t.url, { path: '/plants', token: t.token })).status);
        return answers;
      });
      assert.deepEqual(statuses, Array<number>(16).fill(401), `refused from ${Math.round(performance.now() - revokedAt)} ms after the revocation`);
    });

    it('sends each webhook event once, from the instance\'s one dispatcher, woken by creates in either thread', async () => {
      const receiver = await Receiver.start();
      cleanups.push(() => receiver.close());
      // The poll is an hour away: every delivery here comes from a wake-up by a create.
      const t = await start(
        { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
        {
          webhookPollIntervalMs: 3_600_000,
          prepare: (store: Store) =>
            store.webhookSubscriptions.add({ name: 'hook', url: receiver.url(), secret: generateWebhookSecret(), idPrefix: generateEventIdPrefix(), createdAt: new Date() }),
        },
      );
      const creates = 30;
      await onEveryWorker(t.instance, async () => {
        for (let index = 0; index < creates; index += 1) {
          const answer = await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(BigInt(index + 1), 'hooked') });
          assert.equal(answer.status, 200, answer.body);
        }
      });
      await receiver.waitFor((received) => received.length >= creates, 20_000, `${creates} events`);
      // Anything sent twice would arrive within the attempt's own time: wait past a few round trips of the dispatcher.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const ids = receiver.received.map((request) => request.headers['webhook-id']);
      assert.equal(receiver.received.length, creates, 'one request per event');
      assert.equal(new Set(ids).size, creates, 'every event a different id');
      const plants = receiver.received.map((request) => (JSON.parse(request.body) as { id: number }).id).sort((a, b) => a - b);
      assert.deepEqual(plants, Array.from({ length: creates }, (_, index) => index + 1));
    });

    it('deletes in the worker thread by the exact id: 204, then GET 404 and a second DELETE 404 with Error records; its neighbours stay', async () => {
      const t = await start();
      const deleteLabels = { method: 'DELETE', route: '/plants/{id}' };
      for (const id of [9007199254740993n, INT64_MAX, INT64_MIN]) {
        // Its neighbours: an id rounded through a double (2^53 + 1 to 2^53) would delete one of them instead.
        const neighbours = [id - 1n, id + 1n].filter((neighbour) => neighbour >= INT64_MIN && neighbour <= INT64_MAX);
        for (const neighbour of neighbours) {
          assert.equal((await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(neighbour, 'neighbour') })).status, 200);
        }
        const remove = () => freshRequest(t.url, { method: 'DELETE', path: `/plants/${id}`, token: t.token });
        // A delete the main thread answers removes the plant too: create it again until the worker deletes it.
        let deletedBy: number | undefined;
        for (let attempt = 0; attempt < ATTEMPTS && deletedBy !== WORKER; attempt += 1) {
          const created = await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(id, 'to delete') });
          assert.equal(created.status, 200, created.body);
          const { slot, answer } = await answeredBy(t.instance, deleteLabels, remove);
          assert.deepEqual([answer.status, answer.body], [204, ''], `DELETE ${id} answered by thread ${slot}`);
          deletedBy = slot;
        }
        assert.equal(deletedBy, WORKER, `the worker thread deleted none of ${ATTEMPTS} tries`);
        assert.equal(await t.store.plants.get(id), undefined, 'deleted from the database');
        for (const neighbour of neighbours) assert.deepEqual(await t.store.plants.get(neighbour), { id: neighbour, name: 'neighbour', tag: null }, `${neighbour} stays`);
        await untilTheWorkerAnswers(
          t.instance,
          { method: 'GET', route: '/plants/{id}' },
          () => freshRequest(t.url, { path: `/plants/${id}`, token: t.token }),
          (answer) => assertErrorAnswer(answer, 404, `no plant with id ${id}`),
        );
        await untilTheWorkerAnswers(t.instance, deleteLabels, remove, (answer) => assertErrorAnswer(answer, 404, `no plant with id ${id}`));
      }
    });

    it('records the last use of a token the worker thread admitted', async () => {
      // Last uses are written with each refresh of the token cache: every 300 ms here.
      const t = await start({ TOKEN_CACHE_MS: '300' });
      // A token of its own for each request, so that the one the worker admitted was used in no other thread.
      let admitted: { name: string; sentAt: number; answeredAt: number } | undefined;
      for (let attempt = 0; attempt < ATTEMPTS && admitted === undefined; attempt += 1) {
        const token = generateToken();
        const name = `use-${attempt}`;
        await t.store.tokens.add(newToken(name, hashToken(token)));
        const sentAt = Date.now();
        const { slot, answer } = await answeredBy(t.instance, { method: 'GET', route: '/plants' }, () => freshRequest(t.url, { path: '/plants', token }));
        assert.equal(answer.status, 200, answer.body);
        if (slot === WORKER) admitted = { name, sentAt, answeredAt: Date.now() };
      }
      assert.ok(admitted, `the worker thread answered none of ${ATTEMPTS} requests`);
      const { name, sentAt, answeredAt } = admitted;
      const lastUse = async () => (await t.store.tokens.list()).find((token) => token.name === name)?.lastUsedAt ?? null;
      await waitFor(`the last use of ${name} to be stored`, async () => (await lastUse()) !== null, { timeoutMs: 10_000, intervalMs: 100 });
      const lastUsedAt = (await lastUse())?.getTime() ?? 0;
      assert.ok(lastUsedAt >= sentAt && lastUsedAt <= answeredAt, `last used at ${lastUsedAt}, while the request ran (${sentAt} to ${answeredAt})`);
    });

    it(`answers /readyz in the worker thread 200 ready${kind === 'sqlite' ? ', 503 with an Error record while another connection holds the write lock, and 200 again once it is released' : ''}`, async () => {
      const t = await start();
      const readyLabels = { method: 'GET', route: '/readyz' };
      const ready = () => freshRequest(t.url, { path: '/readyz' });
      await untilTheWorkerAnswers(t.instance, readyLabels, ready, (answer) => assert.deepEqual([answer.status, JSON.parse(answer.body)], [200, { status: 'ready' }]));
      if (t.config.database.kind !== 'sqlite') return;
      // Another connection (as another process would) holds the write lock: the heartbeat the worker asks the main
      // thread to write finds it, and gives up after about a second.
      const other = new DatabaseSync(t.config.database.path);
      try {
        // Past the time a successful heartbeat answers for.
        await new Promise((resolve) => setTimeout(resolve, READY_REUSE_MS + 50));
        other.exec('BEGIN EXCLUSIVE');
        await untilTheWorkerAnswers(t.instance, readyLabels, ready, (answer) => assertErrorAnswer(answer, 503, 'storage is unavailable; retry shortly'));
        other.exec('ROLLBACK');
        await waitFor(
          'the worker thread to answer /readyz 200 again',
          async () => {
            const { slot, answer } = await answeredBy(t.instance, readyLabels, ready);
            if (answer.status !== 200) assertErrorAnswer(answer, 503, 'storage is unavailable; retry shortly');
            return slot === WORKER && answer.status === 200;
          },
          { timeoutMs: 10_000, intervalMs: 50 },
        );
      } finally {
        if (other.isOpen) other.close();
      }
    });

    it('refuses to start a second instance on a port an instance holds, rather than share the port with it', async () => {
      const t = await start();
      const port = Number(new URL(t.url).port);
      const second = loadConfig({ LOG_LEVEL: 'silent', WORKERS: '2', DATABASE_URL: t.config.database.kind === 'sqlite' ? `sqlite:${t.config.database.path}` : t.config.database.url, HOST: '127.0.0.1', PORT: String(port) });
      await assert.rejects(startInstance(second), (error: Error & { code?: string }) => error.code === 'EADDRINUSE');
      assert.equal((await freshRequest(t.url, { path: '/healthz' })).status, 200, 'the first instance serves on');
    });

    it('replaces a worker that ends, logging it, and goes on serving; every create it acknowledged is stored', async () => {
      const t = await start();
      const acknowledged = new Map<bigint, string>();
      let stopped = false;
      let refused = 0;
      const client = async () => {
        while (!stopped) {
          const id = BigInt(randomInt(1, 2 ** 47));
          try {
            const answer = await freshRequest(t.url, { method: 'POST', path: '/plants', token: t.token, body: plantBody(id, `n${id}`) });
            if (answer.status === 200) acknowledged.set(id, `n${id}`);
            else refused += 1;
          } catch {
            // A connection of the worker that ended: not acknowledged.
          }
        }
      };
      const clients = Array.from({ length: 8 }, client);
      try {
        await waitFor('some creates', () => acknowledged.size >= 50, { timeoutMs: 30_000 });
        const ended = t.instance.workers.threads()[0];
        assert.ok(ended, 'worker 1 runs');
        await ended.terminate();
        await waitFor(
          'the replacement to listen',
          () => t.logs().some((line) => line['msg'] === 'the replacement worker thread listens' && line['worker'] === 1),
          { timeoutMs: 30_000 },
        );
        const replacement = t.instance.workers.threads()[0];
        assert.ok(replacement && replacement !== ended, 'a new thread in slot 1');
        const afterReplacement = acknowledged.size;
        await onEveryWorker(t.instance, () => waitFor('creates after the replacement', () => acknowledged.size >= afterReplacement + 100, { timeoutMs: 30_000 }));
      } finally {
        // A failed step must not leave the clients running: the file would never end.
        stopped = true;
        await Promise.all(clients);
      }
      const died = t.logs().find((line) => line['msg'] === 'a worker thread ended unexpectedly; replacing it');
      assert.equal(died?.['worker'], 1);
      assert.equal(died?.['level'], 50, 'logged as an error');
      assert.equal(refused, 0, 'no create was answered anything but 200');
      for (const [id, name] of acknowledged) assert.equal((await t.store.plants.get(id))?.name, name, `acknowledged ${id} is stored`);
      assert.equal((await freshRequest(t.url, { path: '/readyz' })).status, 200);
    });
  });
}
