import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { chromium as chromiumBinary, located, skipWithout } from '../helpers/prerequisites.js';
import { createToken, startServer, type ServerProcess } from '../helpers/process.js';

/**
 * A host name of our own, resolved to the server's 127.0.0.1 by Chromium itself: Swagger UI treats pages on
 * localhost and 127.0.0.1 specially (no online validator badge), and the page must be proven offline as it is served
 * in production, under a real name.
 */
const HOST = 'plantstore.test';

/**
 * The flags Chromium needs here: headless, no sandbox (root, in a container), no GPU, and none of its own
 * background traffic (update checks, sync, QUIC probes, first-run pages), which would otherwise flood refused
 * connections on a machine without Internet access. Playwright adds a fresh temporary --user-data-dir and removes it.
 */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  `--host-resolver-rules=MAP ${HOST} 127.0.0.1`,
];

/** The four plant operations, as the document names them; the page must show each. */
const OPERATION_IDS = ['addPlant', 'listPlants', 'getPlant', 'deletePlant'] as const;

interface Operation {
  readonly method: string;
  readonly path: string;
  readonly summary: string;
}

/**
 * Runs in the page before any of its own scripts: collects what `securitypolicyviolation` events say. A string, as
 * this project compiles without the DOM's types.
 */
const RECORD_CSP_VIOLATIONS = `
  window.cspViolations = [];
  document.addEventListener('securitypolicyviolation', (event) => {
    window.cspViolations.push(event.effectiveDirective + ' blocked ' + (event.blockedURI || 'inline') + ' at ' + event.sourceFile + ':' + event.lineNumber);
  });
`;

/**
 * The reference page in a real browser, served by a real `plantstore serve`: it renders the plant operations from
 * the document, "Try it out" works under its CSP, and nothing it loads comes from another origin. A screenshot is
 * left in a temporary folder for a human to look at (its path is printed). Without Chromium the suite is skipped,
 * saying how to install it, or fails where CI is set (helpers/prerequisites.ts).
 */
describe('GET /docs in headless Chromium', { skip: skipWithout(chromiumBinary()) }, () => {
  let db: TestDatabase;
  let server: ServerProcess | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let token: string;
  let origin: string;
  let screenshotDir: string;
  /** Every URL the page asked for, from the DevTools protocol's Network.requestWillBeSent. */
  const requested: string[] = [];
  const consoleErrors: string[] = [];
  const pageErrors: string[] = [];

  before(async () => {
    const executablePath = located(chromiumBinary());
    db = await sqliteDatabase();
    const env = { DATABASE_URL: db.url };
    token = createToken('docs-browser', env);
    server = await startServer(env);
    origin = `http://${HOST}:${server.port}`;
    browser = await chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    // The slowest step is parsing Swagger UI's 1.7 MB bundle on a busy two-core machine.
    page.setDefaultTimeout(60_000);
    const devtools = await context.newCDPSession(page);
    devtools.on('Network.requestWillBeSent', (event) => requested.push(event.request.url));
    await devtools.send('Network.enable');
    // A load the policy blocks need not reach the network layer at all; the page's own violation events report it.
    await page.addInitScript({ content: RECORD_CSP_VIOLATIONS });
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    screenshotDir = await fs.mkdtemp(path.join(os.tmpdir(), 'plantstore-docs-screenshot-'));
  });

  after(async () => {
    // Each step whatever the one before did: a browser that failed to close must not keep the server running.
    try {
      await browser?.close();
    } finally {
      try {
        await server?.stop();
      } finally {
        await db?.cleanup();
      }
    }
  });

  /** The operation's method, path and summary, as /openapi.json states them. */
  async function documented(operationId: string): Promise<Operation> {
    const document = (await (await fetch(`${server?.base}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { operationId: string; summary: string }>>;
    };
    for (const [pathName, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (operation.operationId === operationId) return { method: method.toUpperCase(), path: pathName, summary: operation.summary };
      }
    }
    throw new Error(`${operationId} is not in /openapi.json`);
  }

  /** The rendered block of one operation: Swagger UI's `.opblock`, found by the operationId it displays. */
  function operationBlock(operationId: string) {
    return page.locator('.opblock').filter({ has: page.locator('.opblock-summary-operation-id', { hasText: new RegExp(`^${operationId}$`) }) });
  }

  it('renders the create, list, get and delete operations, each with its method, path and summary', async (t) => {
    const started = Date.now();
    const response = await page.goto(`${origin}/docs`, { waitUntil: 'load' });
    assert.equal(response?.status(), 200);
    for (const operationId of OPERATION_IDS) {
      const expected = await documented(operationId);
      const block = operationBlock(operationId);
      await block.waitFor({ state: 'visible' });
      assert.equal(await block.count(), 1, `${operationId} is shown once`);
      assert.equal((await block.locator('.opblock-summary-method').innerText()).trim(), expected.method, operationId);
      assert.equal((await block.locator('.opblock-summary-path').innerText()).replace(/\u200b/g, '').trim(), expected.path, operationId);
      assert.equal((await block.locator('.opblock-summary-description').innerText()).trim(), expected.summary, operationId);
    }
    t.diagnostic(`/docs rendered its operations in Chromium in ${Date.now() - started} ms`);
    // Before anything is tried on the page, so the picture shows no token.
    const screenshot = path.join(screenshotDir, 'docs.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    t.diagnostic(`screenshot of /docs for a human to look at: ${screenshot}`);
  });

  it('tries an operation from the page: with a token from "Authorize", GET /plants answers the stored plant', async () => {
    const created = await fetch(`${server?.base}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"id":7,"name":"Tried from the reference page"}',
    });
    assert.equal(created.status, 200);
    await page.locator('.auth-wrapper .authorize').click();
    const dialog = page.locator('.dialog-ux');
    // The scheme's description names every scope a token may hold.
    const described = await dialog.innerText();
    for (const scope of ['plants:read', 'plants:create', 'plants:delete']) assert.ok(described.includes(scope), `the Authorize dialog names ${scope}: ${described}`);
    await dialog.locator('input').fill(token);
    await dialog.locator('button.authorize').click();
    await dialog.locator('button.btn-done').click();
    const list = operationBlock('listPlants');
    await list.locator('.opblock-summary').click();
    // Among its documented answers, the 403 of a token without plants:read.
    const documentedStatuses = await list.locator('.responses-table .response-col_status').allInnerTexts();
    assert.ok(documentedStatuses.map((text) => text.trim()).includes('403'), documentedStatuses.join(' '));
    await list.locator('.try-out__btn').click();
    await list.locator('.execute').click();
    const status = list.locator('.live-responses-table tbody .response-col_status');
    await status.waitFor({ state: 'visible' });
    assert.equal((await status.innerText()).trim(), '200');
    assert.match(await list.locator('.live-responses-table tbody .response-col_description').innerText(), /Tried from the reference page/);
    // The token lives in the page's memory only: persistAuthorization is off.
    const stored = String(await page.evaluate('JSON.stringify([localStorage, sessionStorage])'));
    assert.equal(stored.includes(token), false, 'the token is not kept in the browser\'s storage');
  });

  it('"Try it out" on GET /plants/9007199254740993 shows 9007199254740993, and a POST sends its id exactly', async () => {
    const created = await fetch(`${server?.base}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"id":9007199254740993,"name":"Past a double"}',
    });
    assert.equal(created.status, 200);
    const get = operationBlock('getPlant');
    await get.locator('.opblock-summary').click();
    await get.locator('.try-out__btn').click();
    await get.locator('input[placeholder="id"]').fill('9007199254740993');
    await get.locator('.execute').click();
    const status = get.locator('.live-responses-table tbody .response-col_status');
    await status.waitFor({ state: 'visible' });
    assert.equal((await status.innerText()).trim(), '200');
    const shown = await get.locator('.live-responses-table tbody .response-col_description').innerText();
    assert.match(shown, /"id": 9007199254740993,/, shown);
    assert.doesNotMatch(shown, /9007199254740992/);
    // The request body editor's text is sent as typed: the plant is stored under the exact id.
    const create = operationBlock('addPlant');
    await create.locator('.opblock-summary').click();
    await create.locator('.try-out__btn').click();
    await create.locator('textarea.body-param__text').fill('{"id": 9223372036854775807, "name": "Sent from the page"}');
    await create.locator('.execute').click();
    const createdStatus = create.locator('.live-responses-table tbody .response-col_status');
    await createdStatus.waitFor({ state: 'visible' });
    assert.equal((await createdStatus.innerText()).trim(), '200');
    const read = await fetch(`${server?.base}/plants/9223372036854775807`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(await read.text(), '{"id":9223372036854775807,"name":"Sent from the page"}');
  });

  it('asks nothing of another origin and breaks no rule of its Content-Security-Policy', async () => {
    // Late requests (images, anything a rendered operation pulls in) are in before the list is read.
    await page.waitForLoadState('networkidle');
    assert.ok(requested.includes(`${origin}/docs`), `the DevTools hook saw the page itself: ${requested.join(', ')}`);
    // data: URIs (icons inside the stylesheet) are no request to anyone; everything else must be this server.
    const elsewhere = requested.filter((url) => !url.startsWith('data:') && new URL(url).origin !== origin);
    assert.deepEqual(elsewhere, [], 'the page asked another origin');
    assert.deepEqual(await page.evaluate('window.cspViolations'), [], 'CSP violations');
    // Chromium reports blocked loads and inline styles here too ("... violates the following Content Security Policy
    // directive"), and any asset that failed to load.
    assert.deepEqual(consoleErrors, [], 'errors on the console');
    assert.deepEqual(pageErrors, [], 'uncaught errors in the page');
  });
});
