import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { before, describe, it } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { useTestApp } from '../helpers/app.js';
import { sqliteDatabase } from '../helpers/databases.js';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
  parameters?: Array<{ in: string }>;
}
interface Document {
  servers?: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
}

describe('/openapi.json under Redocly lint', () => {
  const t = useTestApp(sqliteDatabase);
  let source: string;
  let document: Document;

  before(async () => {
    const response = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(response.statusCode, 200);
    source = response.body;
    document = JSON.parse(source) as Document;
  });

  it('has no error and no warning under the recommended ruleset', async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source, absoluteRef: 'openapi.json', config });
    const described = problems.map((problem) => `${problem.severity} ${problem.ruleId}: ${problem.message} at ${problem.location[0]?.pointer ?? '?'}`);
    assert.deepEqual(described, []);
  });

  it('names a relative server, since the service answers at whatever address it is deployed', () => {
    assert.deepEqual(document.servers, [{ url: '/' }]);
  });

  it('documents 408 and 431 on every operation and 414 on those with a path parameter, as Error records', () => {
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const hasPathParameter = (operation.parameters ?? []).some((parameter) => parameter.in === 'path');
        for (const status of ['408', '414', '431']) {
          const expected = status !== '414' || hasPathParameter;
          const response = operation.responses[status];
          assert.equal(response !== undefined, expected, `${method} ${path} ${status}`);
          if (expected) assert.deepEqual(response?.content?.['application/json']?.schema, { $ref: '#/components/schemas/Error' }, `${method} ${path} ${status}`);
        }
      }
    }
  });

  it('documents what the server does answer: 414 for a long path parameter, 431 for a large header block', async () => {
    const long = await t.app.inject({ method: 'GET', url: `/plants/${'9'.repeat(101)}`, headers: t.headers });
    assert.equal(long.statusCode, 414);
    assert.ok(document.paths['/plants/{id}']?.get?.responses['414']);

    // 431 is written by Node's HTTP parser, below Fastify's inject, so it takes a real connection.
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = t.app.server.address() as { port: number };
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const big = httpRequest({ host: '127.0.0.1', port, path: '/healthz', headers: { 'x-filler': 'x'.repeat(t.config.http.maxHeaderBytes) } }, (response) => {
        response.resume();
        resolve(response.statusCode);
      });
      big.on('error', reject);
      big.end();
    });
    assert.equal(status, 431);
    assert.ok(document.paths['/healthz']?.get?.responses['431']);
  });
});
