import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { SCOPES } from '../../src/auth/scopes.js';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { StorageUnavailableError } from '../../src/storage/errors.js';
import { useTestApp } from '../helpers/app.js';
import { sqliteDatabase } from '../helpers/databases.js';
import { newToken } from '../helpers/tokens.js';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: object }>; headers?: Record<string, { required?: boolean }> }>;
  requestBody?: { content: Record<string, { schema: object }> };
  security?: unknown[];
}
interface Document {
  openapi: string;
  info: { version: string; license: { name: string } };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, object>; securitySchemes: Record<string, object> };
  security: unknown[];
  webhooks?: Record<string, Record<string, Operation & { parameters?: Array<{ name: string; in: string; required: boolean }> }>>;
}

describe('/openapi.json', () => {
  const t = useTestApp(sqliteDatabase);
  let document: Document;
  let ajv: Ajv2020;

  before(async () => {
    const response = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^application\/json/);
    document = response.json() as Document;
    ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    for (const [name, schema] of Object.entries(document.components.schemas)) ajv.addSchema(schema, `#/components/schemas/${name}`);
  });

  /**
   * Validates a live body against the schema the document declares for that operation and status, and checks that
   * every header the document says that response carries is there.
   */
  function assertMatchesDocument(path: string, method: string, status: number, body: unknown, headers: Record<string, unknown> = {}): void {
    const operation = document.paths[path]?.[method];
    assert.ok(operation, `${method} ${path} is documented`);
    for (const [name, header] of Object.entries(operation.responses[String(status)]?.headers ?? {})) {
      if (header.required) assert.ok(headers[name.toLowerCase()] !== undefined, `${method} ${path} ${status} carries ${name}`);
    }
    if (status === 204) {
      assert.ok(operation.responses['204'], `${method} ${path} documents status 204`);
      assert.equal(body, '');
      return;
    }
    const schema = operation.responses[String(status)]?.content?.['application/json']?.schema;
    assert.ok(schema, `${method} ${path} documents status ${status}`);
    const validate = ajv.compile({ ...resolve(schema), $schema: undefined });
    assert.ok(validate(body), `${JSON.stringify(body)}: ${ajv.errorsText(validate.errors)}`);
  }

  function resolve(schema: object): object {
    const ref = (schema as { $ref?: string }).$ref;
    return ref ? (document.components.schemas[ref.split('/').pop() as string] as object) : schema;
  }

  it('is a valid OpenAPI 3.1 document (checked by a real validator)', async () => {
    const validator = new Validator();
    const result = await validator.validate({ ...structuredClone(document) });
    assert.equal(result.valid, true, JSON.stringify(result.errors));
    assert.equal(validator.version, '3.1');
  });

  it('describes the interface: version 1.0.0, MIT, bearer auth, POST /plants', () => {
    assert.equal(document.openapi, '3.1.0');
    assert.equal(document.info.version, '1.0.0');
    assert.equal(document.info.license.name, 'MIT');
    const { description, ...scheme } = document.components.securitySchemes.bearerAuth as { description?: string };
    assert.deepEqual(scheme, { type: 'http', scheme: 'bearer' });
    for (const scope of SCOPES) assert.ok(description?.includes(`\`${scope}\``), `the scheme's description names ${scope}`);
    assert.deepEqual(document.security, [{ bearerAuth: [] }]);
    const create = document.paths['/plants']?.post;
    assert.ok(create);
    assert.deepEqual(create.requestBody?.content['application/json']?.schema, { $ref: '#/components/schemas/NewPlant' });
    assert.deepEqual(create.responses['200']?.content?.['application/json']?.schema, { $ref: '#/components/schemas/Plant' });
    for (const status of ['400', '401', '409', '413', '415']) {
      assert.deepEqual(create.responses[status]?.content?.['application/json']?.schema, { $ref: '#/components/schemas/Error' });
    }
  });

  it('describes the newPlant webhook: a POST of the NewPlant schema with the Standard Webhooks headers', () => {
    const post = document.webhooks?.newPlant?.post;
    assert.ok(post, 'webhooks.newPlant.post');
    assert.deepEqual(post.requestBody?.content['application/json']?.schema, { $ref: '#/components/schemas/NewPlant' });
    assert.deepEqual(
      (post.parameters ?? []).map((parameter) => [parameter.name, parameter.in, parameter.required]),
      [
        ['webhook-id', 'header', true],
        ['webhook-timestamp', 'header', true],
        ['webhook-signature', 'header', true],
      ],
    );
    assert.ok(post.responses['200']);
  });

  it('documents the schemas the server validates with', () => {
    const newPlant = document.components.schemas.NewPlant as { required: string[]; additionalProperties: boolean; properties: Record<string, { type: string; format?: string; maxLength?: number }> };
    assert.deepEqual([...newPlant.required].sort(), ['id', 'name']);
    assert.equal(newPlant.additionalProperties, false);
    assert.deepEqual({ type: newPlant.properties.id?.type, format: newPlant.properties.id?.format }, { type: 'integer', format: 'int64' });
    assert.equal(newPlant.properties.name?.maxLength, t.config.limits.nameLength);
    const plant = document.components.schemas.Plant as { properties: Record<string, unknown>; required: string[] };
    assert.deepEqual(Object.keys(plant.properties).sort(), ['name', 'tag']);
    assert.deepEqual(plant.required, ['name']);
    const error = document.components.schemas.Error as { properties: Record<string, { format?: string }>; required: string[] };
    assert.deepEqual([...error.required].sort(), ['error', 'message']);
    assert.equal(error.properties.error?.format, 'int32');
  });

  it('leaves the root, health, readiness and itself open, and nothing else (metrics needs metrics:read)', () => {
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const open = ['/', '/healthz', '/readyz', '/openapi.json'].includes(path);
        assert.equal(operation.security !== undefined && operation.security.length === 0, open, `${method} ${path}`);
      }
    }
  });

  it('names the one scope each operation needs in its security requirement, and documents its 403', () => {
    const needs: Record<string, Record<string, string>> = {
      '/plants': { post: 'plants:create', get: 'plants:read' },
      '/plants/{id}': { get: 'plants:read', delete: 'plants:delete' },
      '/plants/events': { get: 'plants:read' },
      '/metrics': { get: 'metrics:read' },
    };
    for (const [path, methods] of Object.entries(needs)) {
      for (const [method, scope] of Object.entries(methods)) {
        const operation = document.paths[path]?.[method];
        assert.deepEqual(operation?.security, [{ bearerAuth: [scope] }], `${method} ${path}`);
        assert.deepEqual(operation?.responses['403']?.content?.['application/json']?.schema, { $ref: '#/components/schemas/Error' }, `${method} ${path}`);
        assert.equal(operation?.responses['403']?.headers?.['WWW-Authenticate']?.required, true, `${method} ${path}`);
      }
    }
    // Every operation that asks for a token is one of these: none is left needing "any token".
    const guarded = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods)
        .filter(([, operation]) => operation.security?.length)
        .map(([method]) => `${method} ${path}`),
    );
    assert.deepEqual(guarded.sort(), ['delete /plants/{id}', 'get /metrics', 'get /plants', 'get /plants/events', 'get /plants/{id}', 'post /plants']);
  });

  it('describes the change feed as text/event-stream, with its events and its cursor', () => {
    const operation = document.paths['/plants/events']?.get;
    const ok = operation?.responses['200']?.content;
    assert.deepEqual(Object.keys(ok ?? {}), ['text/event-stream']);
    const description = JSON.stringify(ok?.['text/event-stream']);
    for (const shape of ['event: plant.created', 'event: plant.deleted', 'event: reset', 'id: 42']) assert.ok(description.includes(shape), shape);
    assert.deepEqual(operation?.responses['406']?.content?.['application/json']?.schema, { $ref: '#/components/schemas/Error' });
    assert.ok(JSON.stringify(operation).includes('"after"'));
  });

  it('matches the live 403 of a token without the scope, and the live 401 of an expired one, headers included', async () => {
    const reader = generateToken();
    const expired = generateToken();
    await t.store.tokens.add(newToken(`reader-${randomUUID()}`, hashToken(reader), { scopes: ['plants:read'] }));
    await t.store.tokens.add(newToken(`expired-${randomUUID()}`, hashToken(expired), { expiresAt: new Date(Date.now() - 1000) }));
    const refused = await t.app.inject({ method: 'POST', url: '/plants', headers: { ...t.headers, authorization: `Bearer ${reader}` }, payload: '{"id":5,"name":"a"}' });
    assert.equal(refused.statusCode, 403, refused.body);
    assertMatchesDocument('/plants', 'post', 403, refused.json(), refused.headers);
    const deleted = await t.app.inject({ method: 'DELETE', url: '/plants/5', headers: { authorization: `Bearer ${reader}` } });
    assert.equal(deleted.statusCode, 403, deleted.body);
    assertMatchesDocument('/plants/{id}', 'delete', 403, deleted.json(), deleted.headers);
    const late = await t.app.inject({ method: 'GET', url: '/plants', headers: { authorization: `Bearer ${expired}` } });
    assert.equal(late.statusCode, 401, late.body);
    assertMatchesDocument('/plants', 'get', 401, late.json(), late.headers);
  });

  it('matches live responses of every status it documents for POST /plants', async () => {
    const post = (payload: string, headers = t.headers) => t.app.inject({ method: 'POST', url: '/plants', headers, payload });
    const cases: Array<[number, Promise<{ statusCode: number; json(): unknown; headers: Record<string, unknown> }>]> = [
      [200, post('{"id":1,"name":"a","tag":"b"}')],
      [400, post('{"id":"1","name":"a"}')],
      [401, post('{"id":2,"name":"a"}', { 'content-type': 'application/json' })],
      [409, post('{"id":1,"name":"other"}')],
      [413, post(`{"id":3,"name":"${'x'.repeat(20_000)}"}`)],
      [415, post('{"id":4,"name":"a"}', { ...t.headers, 'content-type': 'text/plain' })],
    ];
    for (const [status, pending] of cases) {
      const response = await pending;
      assert.equal(response.statusCode, status);
      assertMatchesDocument('/plants', 'post', status, response.json(), response.headers);
    }
  });

  it('answers GET / with links to the documentation and to itself, as documented, without a token', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/' });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), { docs: '/docs', openapi: '/openapi.json' });
    assertMatchesDocument('/', 'get', 200, response.json(), response.headers);
  });

  it('documents GET /metrics as Prometheus text, and it answers so', async () => {
    const operation = document.paths['/metrics']?.get;
    assert.deepEqual(operation?.responses['200']?.content, { 'text/plain': { schema: { type: 'string' } } });
    assert.deepEqual(operation?.security, [{ bearerAuth: ['metrics:read'] }]);
    const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${t.token}` } });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  });

  it('declares X-Request-Id on every response of every operation', () => {
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          assert.equal(response.headers?.['X-Request-Id']?.required, true, `${method} ${path} ${status}`);
        }
      }
    }
  });

  it('declares the headers clients rely on: Link for the next page, WWW-Authenticate on 401, Retry-After on 429 and 503', () => {
    assert.ok(document.paths['/plants']?.get?.responses['200']?.headers?.Link);
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (operation.responses['401']) assert.equal(operation.responses['401'].headers?.['WWW-Authenticate']?.required, true, `${method} ${path}`);
        for (const status of ['429', '503']) {
          if (operation.responses[status]) assert.equal(operation.responses[status].headers?.['Retry-After']?.required, true, `${method} ${path} ${status}`);
        }
      }
    }
  });

  it('matches live responses of the read and delete operations, and of 401 and 503, headers included', async () => {
    const request = (method: 'GET' | 'DELETE' | 'POST', url: string, headers = t.headers, payload?: string) =>
      t.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
    for (const id of [10, 11]) assert.equal((await request('POST', '/plants', t.headers, `{"id":${id},"name":"p${id}"}`)).statusCode, 200);
    const checks: Array<[string, string, string, number, string?]> = [
      ['GET', '/plants?limit=1', '/plants', 200],
      ['GET', '/plants?limit=0', '/plants', 400],
      ['GET', '/plants/10', '/plants/{id}', 200],
      ['GET', '/plants/404', '/plants/{id}', 404],
      ['GET', '/plants/x', '/plants/{id}', 400],
      ['DELETE', '/plants/11', '/plants/{id}', 204],
      ['DELETE', '/plants/11', '/plants/{id}', 404],
      ['GET', '/plants', '/plants', 401, 'no token'],
      ['DELETE', '/plants/10', '/plants/{id}', 401, 'no token'],
    ];
    for (const [method, url, path, status, noToken] of checks) {
      const response = await request(method as 'GET' | 'DELETE', url, noToken ? {} : t.headers);
      assert.equal(response.statusCode, status, `${method} ${url}: ${response.body}`);
      assertMatchesDocument(path, method.toLowerCase(), status, status === 204 ? response.body : response.json(), response.headers);
    }
    const page = await request('GET', '/plants?limit=1');
    const [first] = page.json() as Array<{ id: number }>;
    assert.equal(page.headers.link, `</plants?limit=1&after=${first?.id}>; rel="next"`);

    // Storage refusing the batch: a 503 with Retry-After, as documented.
    const createPlants = t.store.plants.create.bind(t.store.plants);
    t.store.plants.create = () => Promise.reject(new StorageUnavailableError('storage is unavailable; retry shortly'));
    try {
      const refused = await request('POST', '/plants', t.headers, '{"id":12,"name":"p12"}');
      assert.equal(refused.statusCode, 503);
      assertMatchesDocument('/plants', 'post', 503, refused.json(), refused.headers);
    } finally {
      t.store.plants.create = createPlants;
    }
  });
});
