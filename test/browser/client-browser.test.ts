/**
 * plantstore/client in a real browser, without a bundler: a plain page imports dist/src/client/index.js as the test
 * serves it (the page and its modules are answered by the test through Playwright's routing, on the server's
 * origin, as a page served beside the API would be), lists the plants with exact ids, receives a change through
 * watch, and after the server stops and starts again on the same port goes on from its cursor by itself.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { createOverHttp, INT64_MAX, INT64_MIN, PAST_DOUBLE } from '../helpers/plants.js';
import { chromium as chromiumBinary, located, skipWithout } from '../helpers/prerequisites.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

const CLIENT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/client');
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** The page: lists every plant, then follows the feed from the cursor it is given; all it sees is kept as text. */
const PAGE = (token: string) => `<!doctype html>
<meta charset="utf-8">
<title>plants</title>
<script type="module">
  import { PlantStore } from '/client/index.js';
  const client = new PlantStore({ url: location.origin, token: ${JSON.stringify(token)}, retry: { baseDelayMs: 50 } });
  window.listed = [];
  window.changes = [];
  window.failure = undefined;
  (async () => {
    for await (const plant of client.list({ limit: 1 })) window.listed.push(typeof plant.id + ' ' + plant.id + ' ' + plant.name);
    for await (const change of client.watch({ after: 0n })) {
      window.changes.push(change.sequence + ' ' + change.type + ' ' + (change.type === 'plant.created' ? typeof change.plant.id + ' ' + change.plant.id + ' ' + change.plant.name : ''));
    }
  })().catch((error) => { window.failure = String(error); });
</script>`;

describe('plantstore/client in Chromium, no bundler', { skip: skipWithout(chromiumBinary()) }, () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let env: Record<string, string>;
  let writer: string;

  before(async () => {
    db = await sqliteDatabase();
    env = { DATABASE_URL: db.url, FEED_POLL_MS: '3600000' };
    writer = createToken('writer', env);
    server = await startServer(env);
    browser = await chromium.launch({ executablePath: located(chromiumBinary()), headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
    page = await (await browser.newContext()).newPage();
    page.setDefaultTimeout(60_000);
    const reader = createToken('page', env, undefined, ['--read-only']);
    await page.route(`${server.base}/page.html`, (route) => route.fulfill({ contentType: 'text/html', body: PAGE(reader) }));
    await page.route(`${server.base}/client/*.js`, (route) => {
      const file = path.basename(new URL(route.request().url()).pathname);
      route.fulfill({ contentType: 'text/javascript', body: fs.readFileSync(path.join(CLIENT_DIR, file)) });
    });
  });
  after(async () => {
    await browser?.close();
    await server?.kill();
    await db?.cleanup();
  });

  const create = (id: string, name: string) => createOverHttp(server.base, writer, id, name);

  it('lists plants with exact bigint ids, receives changes through watch, and resumes after a restart', async () => {
    await create(PAST_DOUBLE, 'Monstera');
    await create(INT64_MIN, 'lowest');
    await page.goto(`${server.base}/page.html`);
    await page.waitForFunction('window.listed.length >= 2 || window.failure', undefined, { timeout: 60_000 });
    assert.equal(await page.evaluate('window.failure'), undefined);
    assert.deepEqual(await page.evaluate('window.listed'), [`bigint ${INT64_MIN} lowest`, `bigint ${PAST_DOUBLE} Monstera`]);
    await page.waitForFunction('window.changes.length >= 2');
    await create(INT64_MAX, 'live');
    await page.waitForFunction('window.changes.length >= 3');
    await server.stop('SIGTERM');
    server = await startServer(env, { port: server.port });
    await create('1', 'after the restart');
    await page.waitForFunction('window.changes.length >= 4 || window.failure');
    assert.equal(await page.evaluate('window.failure'), undefined);
    const changes = (await page.evaluate('window.changes')) as string[];
    const first = BigInt((changes[0] ?? '').split(' ')[0] as string);
    assert.deepEqual(changes, [
      `${first} plant.created bigint ${PAST_DOUBLE} Monstera`,
      `${first + 1n} plant.created bigint ${INT64_MIN} lowest`,
      `${first + 2n} plant.created bigint ${INT64_MAX} live`,
      `${first + 3n} plant.created bigint 1 after the restart`,
    ]);
  });
});
