import assert from 'node:assert/strict';
import { accessSync, constants } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { INT64_MAX, PAST_DOUBLE } from '../helpers/plants.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

/**
 * The change feed in a real browser (docs/event-stream.md): an EventSource, authenticated by
 * `access_token` as a page must, receives creates, and after the server stops (SIGTERM) and starts again on the same
 * port it reconnects by itself with Last-Event-ID and misses none. Chromium as api-reference-browser.test.ts finds it.
 */
function chromiumPath(): string {
  const candidates = process.env.CHROMIUM_PATH ? [process.env.CHROMIUM_PATH] : ['/usr/bin/chromium'];
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not this one
    }
  }
  throw new Error('Chromium not found: install it (Debian: apt-get install -y chromium) or set CHROMIUM_PATH');
}

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Runs in the page: an EventSource on the feed, every event it receives kept as `id event data`. A string: no DOM types here. */
const LISTEN = (token: string) => `
  window.received = [];
  window.errors = 0;
  const source = new EventSource('/plants/events?after=0&access_token=' + encodeURIComponent(${JSON.stringify(token)}));
  for (const type of ['plant.created', 'plant.deleted', 'reset']) {
    source.addEventListener(type, (event) => window.received.push(event.lastEventId + ' ' + type + ' ' + event.data));
  }
  source.onerror = () => { window.errors += 1; };
`;

describe('the change feed in Chromium', () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let token: string;
  let env: Record<string, string>;

  before(async () => {
    db = await sqliteDatabase();
    env = { DATABASE_URL: db.url, FEED_POLL_MS: '3600000' };
    token = createToken('browser', env, undefined, ['--read-only']);
    server = await startServer(env);
    browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
    page = await (await browser.newContext()).newPage();
  });
  after(async () => {
    await browser?.close();
    await server?.kill();
    await db?.cleanup();
  });

  async function create(id: string, name: string): Promise<void> {
    const writer = createToken(`writer-${id}`, env);
    const response = await fetch(`${server.base}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${writer}`, 'content-type': 'application/json' },
      body: `{"id":${id},"name":${JSON.stringify(name)}}`,
    });
    assert.equal(response.status, 200, await response.text());
  }

  const received = () => page.evaluate('window.received') as Promise<string[]>;

  it('receives creates, and after a restart resumes with Last-Event-ID, missing none', async () => {
    // A page of the server's own origin: EventSource is same-origin here, as a page served beside the API would be.
    await page.goto(`${server.base}/openapi.json`);
    await page.evaluate(LISTEN(token));
    await create(PAST_DOUBLE, 'Monstera');
    await page.waitForFunction('window.received.length >= 1', undefined, { timeout: 60_000 });
    await server.stop('SIGTERM');
    server = await startServer(env, { port: server.port });
    await create(INT64_MAX, 'after the restart');
    await create('1', 'and one more');
    await page.waitForFunction('window.received.length >= 3', undefined, { timeout: 60_000 });
    const events = await received();
    const first = BigInt((events[0] ?? '').split(' ')[0] as string);
    assert.deepEqual(events, [
      `${first} plant.created {"id":${PAST_DOUBLE},"name":"Monstera"}`,
      `${first + 1n} plant.created {"id":${INT64_MAX},"name":"after the restart"}`,
      `${first + 2n} plant.created {"id":1,"name":"and one more"}`,
    ]);
    // It was cut off by the restart, and came back by itself.
    assert.ok((await page.evaluate('window.errors')) as number >= 1);
  });
});
