import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { createToken, startServer } from '../helpers/process.js';

/** Credential-bearing headers a client or an operator's proxy may send, each given a secret of its own. */
const CREDENTIAL_HEADERS = [
  'cookie',
  'proxy-authorization',
  'set-cookie',
  'x-api-key',
  'x-auth-token',
  'x-amz-security-token',
  'x-csrf-token',
  'x-client-secret',
  'private-token',
  'x-session-id',
  'api_key',
] as const;

/** Headers that carry no secret and that an operator debugging a client wants to see as sent. */
const PLAIN_HEADERS = { 'content-type': 'application/json', 'user-agent': 'redaction-test/1.0', 'x-request-purpose': 'keep me' };

function send(port: number, headers: OutgoingHttpHeaders, body: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    // node:http, not fetch: fetch refuses some of these names (Set-Cookie, Proxy-Authorization) on a request.
    const request = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/plants', headers }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** Query parameters named like credentials, each with a secret of its own; the URL's other parameters stay. */
const CREDENTIAL_PARAMETERS = [
  'access_token',
  'token',
  'api_key',
  'apikey',
  'key',
  'secret',
  'client_secret',
  'password',
  'passwd',
  'signature',
  'X-Amz-Signature',
  'X-Amz-Credential',
  'sig',
  'auth',
  'code',
  'session_id',
] as const;

function get(port: number, path: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, method: 'GET', path }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode));
    });
    request.on('error', reject);
    request.end();
  });
}

describe('debug request lines', () => {
  let db: TestDatabase;

  before(async () => {
    db = await sqliteDatabase();
  });
  after(() => db?.cleanup());

  it('redact every credential-bearing header, name kept, and the whole log holds no secret', async () => {
    const env = { DATABASE_URL: db.url };
    const token = createToken('redaction', env);
    const secrets = new Map<string, string>(CREDENTIAL_HEADERS.map((name) => [name, `secret-${randomBytes(12).toString('hex')}`]));
    const headers: OutgoingHttpHeaders = { ...PLAIN_HEADERS, authorization: `Bearer ${token}` };
    for (const [name, secret] of secrets) headers[name] = secret;
    // A header sent twice arrives as an array (Set-Cookie) or joined (the rest): both must be redacted whole.
    const secondCookie = `secret-${randomBytes(12).toString('hex')}`;
    headers['set-cookie'] = [secrets.get('set-cookie') as string, secondCookie];

    const parameterSecrets = new Map<string, string>(CREDENTIAL_PARAMETERS.map((name) => [name, `secret-${randomBytes(12).toString('hex')}`]));
    const query = [...parameterSecrets].map(([name, secret]) => `${encodeURIComponent(name)}=${secret}`).join('&');
    // Encoded, the name is still a credential's.
    const encodedNameSecret = `secret-${randomBytes(12).toString('hex')}`;
    const queryPath = `/plants?limit=5&${query}&access%5Ftoken=${encodedNameSecret}&tag=fern`;

    const server = await startServer({ ...env, LOG_LEVEL: 'debug' });
    let status: number | undefined;
    let queryStatus: number | undefined;
    try {
      status = await send(server.port, headers, '{"id":1,"name":"Fern"}');
      queryStatus = await get(server.port, queryPath);
    } finally {
      assert.equal((await server.stop('SIGTERM')).code, 0);
    }
    assert.equal(status, 200, 'the request was served, so the credentials really went through the server');

    const { stdout } = server.output();
    assert.equal(queryStatus, 401, 'credentials in the query string are not taken for a token');
    for (const [name, secret] of [
      ...secrets,
      ...parameterSecrets,
      ['access%5Ftoken', encodedNameSecret],
      ['set-cookie (second)', secondCookie],
      ['authorization', token],
    ] as const) {
      assert.ok(!stdout.includes(secret), `the ${name} secret is not in the log`);
    }
    assert.ok(!stdout.includes(token.slice('plst_'.length, 'plst_'.length + 20)), 'not even part of the token');

    const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const incoming = lines.find((line) => line.msg === 'incoming request' && (line.req as { method?: string } | undefined)?.method === 'POST');
    const logged = incoming?.headers as Record<string, unknown> | undefined;
    assert.ok(logged, JSON.stringify(lines));
    for (const name of ['authorization', ...CREDENTIAL_HEADERS]) assert.equal(logged[name], '[redacted]', `${name}: ${JSON.stringify(logged)}`);
    for (const [name, value] of Object.entries(PLAIN_HEADERS)) assert.equal(logged[name], value, `${name} is logged as sent`);

    const url =
      lines
        .filter((line) => line.msg === 'incoming request')
        .map((line) => (line.req as { url?: string } | undefined)?.url ?? '')
        .find((logged) => logged.startsWith('/plants?')) ?? '';
    const expected = [...parameterSecrets.keys()].map((name) => `${encodeURIComponent(name)}=[redacted]`).join('&');
    assert.equal(url, `/plants?limit=5&${expected}&access%5Ftoken=[redacted]&tag=fern`, 'names and other parameters kept, credential values redacted');
  });
});
