import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { createOverHttp, INT64_MAX, PAST_DOUBLE } from '../helpers/plants.js';
import { chromium as chromiumBinary, located, skipWithout } from '../helpers/prerequisites.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

/**
 * The change feed in a real browser (docs/event-stream.md): an EventSource, authenticated by `access_token` as a page
 * must, receives creates, and after the server stops (SIGTERM) and starts again on the same port it reconnects by
 * itself with Last-Event-ID and misses none. Every answer the browser got to its requests for the feed is kept, with
 * the EventSource's readyState at each open and error, so that a failure shows what the browser saw, and the test
 * holds that each was a stream or a network error (which an EventSource retries), never one that ends it.
 */
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * Runs in the page: an EventSource on the feed, every event it receives kept as `id event data`, and its readyState
 * at each open and error. A string: no DOM types here.
 */
const LISTEN = (token: string) => `
  window.received = [];
  window.errors = 0;
  window.states = [];
  const source = new EventSource('/plants/events?after=0&access_token=' + encodeURIComponent(${JSON.stringify(token)}));
  window.source = source;
  for (const type of ['plant.created', 'plant.deleted', 'reset']) {
    source.addEventListener(type, (event) => window.received.push(event.lastEventId + ' ' + type + ' ' + event.data));
  }
  source.onopen = () => { window.states.push('open ' + source.readyState); };
  source.onerror = () => { window.errors += 1; window.states.push('error ' + source.readyState); };
`;

const isFeed = (url: string) => new URL(url).pathname === '/plants/events';

describe('the change feed in Chromium', { skip: skipWithout(chromiumBinary()) }, () => {
  let db: TestDatabase;
  let first: ServerProcess | undefined;
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let token: string;
  let writer: string;
  let env: Record<string, string>;
  /** Each answer to the page's requests for the feed, in order: `status content-type`, or `failed: <network error>`. */
  const answers: string[] = [];

  before(async () => {
    db = await sqliteDatabase();
    env = { DATABASE_URL: db.url, FEED_POLL_MS: '3600000' };
    // Every token before the first server starts: no CLI process writes the database while the new server starts
    // and the browser resumes, and none blocks this process (and its connection to the browser) meanwhile.
    token = createToken('browser', env, undefined, ['--read-only']);
    writer = createToken('writer', env);
    server = await startServer(env);
    browser = await chromium.launch({ executablePath: located(chromiumBinary()), headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
    page = await (await browser.newContext()).newPage();
    page.on('response', (response) => {
      if (isFeed(response.url())) answers.push(`${response.status()} ${response.headers()['content-type'] ?? ''}`);
    });
    page.on('requestfailed', (request) => {
      if (isFeed(request.url())) answers.push(`failed: ${request.failure()?.errorText ?? 'unknown'}`);
    });
  });
  after(async () => {
    await browser?.close();
    await first?.kill();
    await server?.kill();
    await db?.cleanup();
  });

  const create = (id: string, name: string) => createOverHttp(server.base, writer, id, name);

  const received = () => page.evaluate('window.received') as Promise<string[]>;

  /** What the browser saw, and what each server logged: the message of a failure. */
  async function views(): Promise<string> {
    const source = await page.evaluate('({ readyState: window.source.readyState, errors: window.errors, states: window.states, received: window.received })');
    const logs = [first, server].map((each, index) => `server ${index + 1} (stderr): ${each?.output().stderr.slice(-4000) ?? ''}`);
    return [`the EventSource: ${JSON.stringify(source)}`, `its requests for the feed: ${JSON.stringify(answers)}`, ...logs].join('\n');
  }

  /** Waits for the page to have `count` events; polled by a timer, not by animation frames, which a page need not render. */
  async function waitForEvents(count: number): Promise<void> {
    try {
      await page.waitForFunction(`window.received.length >= ${count}`, undefined, { timeout: 60_000, polling: 100 });
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${await views()}`);
    }
  }

  it('receives creates, and after a restart resumes with Last-Event-ID, missing none', async () => {
    // A page of the server's own origin: EventSource is same-origin here, as a page served beside the API would be.
    await page.goto(`${server.base}/openapi.json`);
    await page.evaluate(LISTEN(token));
    await create(PAST_DOUBLE, 'Monstera');
    await waitForEvents(1);
    first = server;
    await first.stop('SIGTERM');
    server = await startServer(env, { port: first.port });
    await create(INT64_MAX, 'after the restart');
    await create('1', 'and one more');
    await waitForEvents(3);
    const events = await received();
    const firstId = BigInt((events[0] ?? '').split(' ')[0] as string);
    assert.deepEqual(events, [
      `${firstId} plant.created {"id":${PAST_DOUBLE},"name":"Monstera"}`,
      `${firstId + 1n} plant.created {"id":${INT64_MAX},"name":"after the restart"}`,
      `${firstId + 2n} plant.created {"id":1,"name":"and one more"}`,
    ]);
    // It was cut off by the restart, and came back by itself: every answer a stream or a network error.
    const view = await views();
    assert.ok((await page.evaluate('window.errors')) as number >= 1, view);
    assert.equal(await page.evaluate('window.source.readyState'), 1, view);
    assert.deepEqual(answers.filter((answer) => !answer.startsWith('200 text/event-stream') && !answer.startsWith('failed: ')), [], view);
  });
});
