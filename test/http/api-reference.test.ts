import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { API_REFERENCE_CSP } from '../../src/http/plugins/api-reference.js';
import { useTestApp } from '../helpers/app.js';
import { assertErrorRecord } from '../helpers/assertions.js';
import { sqliteDatabase } from '../helpers/databases.js';

/**
 * GET /docs over HTTP, in-process: what the page and its assets answer, with which headers. That the page renders
 * and asks nothing of another host is held in a real browser (test/browser/api-reference-browser.test.ts).
 */
describe('GET /docs, the API reference page', () => {
  const t = useTestApp(sqliteDatabase);

  const get = (url: string, headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url, headers });

  /** The same-origin URLs the page loads: its stylesheets, icons and scripts, and what the initialiser fetches. */
  async function assetsOfThePage(): Promise<string[]> {
    const page = await get('/docs');
    const referenced = [...page.body.matchAll(/(?:href|src)="([^"]+)"/g)].map((match) => match[1] as string);
    assert.ok(referenced.length >= 5, `the page references its assets: ${referenced.join(', ')}`);
    for (const url of referenced) assert.match(url, /^\/docs\//, `${url} is served by plantstore, under /docs/`);
    return referenced;
  }

  it('answers the page without a token, as HTML, with a Content-Security-Policy that allows this origin only', async () => {
    const page = await get('/docs');
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.equal(page.headers['content-security-policy'], API_REFERENCE_CSP);
    assert.match(page.body, /<title>Plant Store API reference<\/title>/);
    // The policy itself: everything from 'self'; no inline or eval'd script anywhere; data: only for images.
    const directives = new Map(API_REFERENCE_CSP.split(/;\s*/).map((directive) => {
      const [name, ...sources] = directive.split(' ');
      return [name as string, sources];
    }));
    assert.deepEqual(directives.get('default-src'), ["'self'"]);
    assert.equal(directives.has('script-src'), false, 'scripts fall back to default-src: self');
    assert.doesNotMatch(API_REFERENCE_CSP, /unsafe-eval|https?:|\*/);
    assert.deepEqual(directives.get('object-src'), ["'none'"]);
    assert.deepEqual(directives.get('frame-ancestors'), ["'none'"]);
  });

  it('serves every asset the page loads without a token, each with the same policy', async () => {
    for (const url of await assetsOfThePage()) {
      const asset = await get(url);
      assert.equal(asset.statusCode, 200, `${url}: ${asset.body.slice(0, 200)}`);
      assert.equal(asset.headers['content-security-policy'], API_REFERENCE_CSP, url);
    }
  });

  it('has no inline script, so the policy needs no unsafe-inline, hash or nonce for scripts', async () => {
    const page = await get('/docs');
    const scripts = [...page.body.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    assert.ok(scripts.length > 0);
    for (const [, attributes, body] of scripts) {
      assert.match(attributes as string, /\bsrc="\/docs\//);
      assert.equal((body as string).trim(), '', 'a script element with a src has no inline body');
    }
    assert.doesNotMatch(page.body, /\son[a-z]+=/i, 'no inline event handlers');
  });

  it('renders the document /openapi.json serves, never generated again, and turns the online validator off', async () => {
    const initializer = await get('/docs/static/swagger-initializer.js');
    assert.equal(initializer.statusCode, 200);
    // Swagger UI would otherwise send the document's URL to validator.swagger.io for a badge (not from localhost,
    // which is why the browser test cannot be relied on to notice).
    assert.match(initializer.body, /validatorUrl: null/);
    assert.match(initializer.body, /url: resolveUrl\('\.\/json'\)/);
    const rendered = await get('/docs/json');
    assert.equal(rendered.statusCode, 200);
    assert.deepEqual(rendered.json(), (await get('/openapi.json')).json());
  });

  it('answers a missing page or asset under /docs/ with an Error record, and refuses to leave its folder', async () => {
    assertErrorRecord(await get('/docs/nope'), 404);
    assertErrorRecord(await get('/docs/static/nope.js'), 404);
    // Climbing out of the assets' folder: refused (403) by @fastify/static, or never reaching it (404) where the
    // path is normalised first; either way an Error record, never a file from elsewhere.
    for (const url of ['/docs/static/../../package.json', '/docs/static/%2e%2e/%2e%2e/package.json', '/docs/static/..%2f..%2fpackage.json']) {
      const response = await get(url);
      assertErrorRecord(response, response.statusCode === 403 ? 403 : 404);
    }
    assertErrorRecord(await t.app.inject({ method: 'POST', url: '/docs', payload: '{}', headers: { 'content-type': 'application/json' } }), 404);
  });

  it('is linked from /openapi.json as its externalDocs, and is not listed as an operation of the API', async () => {
    const document = (await get('/openapi.json')).json() as { externalDocs?: { url: string }; paths: Record<string, unknown> };
    assert.equal(document.externalDocs?.url, '/docs');
    assert.deepEqual(Object.keys(document.paths).filter((path) => path.startsWith('/docs')), []);
  });
});
