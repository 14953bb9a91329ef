import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { loadConfig } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { migrate as migratePostgres } from '../../src/storage/postgres/migrations.js';
import { openDatabase } from '../../src/storage/sqlite/connection.js';
import { migrate as migrateSqlite } from '../../src/storage/sqlite/migrations.js';
import { assertRawErrorRecord } from '../helpers/assertions.js';
import { DATABASES, type TestDatabase } from '../helpers/databases.js';
import { stopPostgresAfterAll } from '../helpers/postgres.js';
import { createToken, rawRequest, startServer, type ServerProcess } from '../helpers/process.js';
import { newToken } from '../helpers/tokens.js';
import { plantstore } from '../helpers/transfer.js';

stopPostgresAfterAll();

/**
 * Scopes and expiry through the real CLI and a real `plantstore serve`, on both databases: tokens made with
 * `token create --scope/--read-only/--expires-in`, what `token list` shows, a 403 answered before a body that is
 * never sent, expiry reached while the server runs, and tokens of a database made before scopes existed.
 */

const EXPIRED_CHALLENGE = 'Bearer realm="plantstore", error="invalid_token", error_description="the token has expired"';
const insufficient = (scope: string) => `Bearer realm="plantstore", error="insufficient_scope", scope="${scope}"`;

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly challenge: string | null;
}

async function send(base: string, token: string, method: string, path: string, body?: string): Promise<Answer> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, body: await response.text(), challenge: response.headers.get('www-authenticate') };
}

function assertRefused(answer: Answer, status: 401 | 403, message: string, challenge: string): void {
  assert.equal(answer.status, status, answer.body);
  assert.deepEqual(JSON.parse(answer.body), { error: status, message });
  assert.equal(answer.challenge, challenge);
}

/** The columns `token list` prints for one token, by name. */
function listed(env: Record<string, string>): Map<string, string[]> {
  const result = plantstore(['token', 'list'], env);
  assert.equal(result.status, 0, result.stderr);
  return new Map(
    result.stdout
      .trim()
      .split('\n')
      .map((line) => line.split('\t'))
      .map(([name, ...columns]) => [name as string, columns]),
  );
}

/**
 * A database as plantstore made it before tokens had scopes (schema version 3), holding one token in that shape;
 * resolves with the token.
 */
async function databaseOfSchemaVersion3(kind: 'sqlite' | 'postgres', url: string): Promise<string> {
  const token = generateToken();
  const createdAt = Date.parse('2025-06-01T12:00:00.000Z');
  if (kind === 'sqlite') {
    const db = openDatabase(url.slice('sqlite:'.length));
    try {
      migrateSqlite(db, 3);
      db.prepare('INSERT INTO tokens (name, hash, created_at, last_used_at) VALUES (?, ?, ?, ?)').run('old', hashToken(token), createdAt, createdAt + 1000);
    } finally {
      db.close();
    }
  } else {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await migratePostgres(client, 3);
      await client.query('INSERT INTO tokens (name, hash, created_at, last_used_at) VALUES ($1, $2, $3, $4)', [
        'old',
        hashToken(token),
        new Date(createdAt),
        new Date(createdAt + 1000),
      ]);
    } finally {
      await client.end();
    }
  }
  return token;
}

for (const database of DATABASES) {
  describe(`token scopes and expiry through the CLI and a real server on ${database.kind}`, () => {
    let db: TestDatabase;
    let env: Record<string, string>;
    let server: ServerProcess;
    const tokens: Record<'reader' | 'creator' | 'deleter', string> = { reader: '', creator: '', deleter: '' };

    before(async () => {
      db = await database.create();
      env = { DATABASE_URL: db.url };
      tokens.reader = createToken('reader', env, undefined, ['--read-only']);
      tokens.creator = createToken('creator', env, undefined, ['--scope', 'plants:create']);
      tokens.deleter = createToken('deleter', env, undefined, ['--scope', 'plants:delete,plants:read', '--expires-in', '90d']);
      server = await startServer(env);
    });
    after(async () => {
      await server?.kill();
      await db?.cleanup();
    });

    it('lists each token with its scopes and expiry', () => {
      const tokenList = listed(env);
      assert.deepEqual(tokenList.get('reader')?.slice(2), ['scopes plants:read', 'expires never']);
      assert.deepEqual(tokenList.get('creator')?.slice(2), ['scopes plants:create', 'expires never']);
      const [scopes, expiry] = tokenList.get('deleter')?.slice(2) ?? [];
      assert.equal(scopes, 'scopes plants:read,plants:delete');
      const expiresAt = Date.parse(/^expires (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$/.exec(expiry ?? '')?.[1] ?? '');
      assert.ok(Math.abs(expiresAt - (Date.now() + 90 * 86_400_000)) < 60_000, expiry);
    });

    it('lets each token do what its scopes allow, and answers 403 with the scope it lacks otherwise', async () => {
      const { base } = server;
      assert.equal((await send(base, tokens.creator, 'POST', '/plants', '{"id":9223372036854775807,"name":"Oak"}')).status, 200);
      assert.equal((await send(base, tokens.reader, 'GET', '/plants/9223372036854775807')).status, 200);
      assert.equal((await send(base, tokens.reader, 'GET', '/plants')).status, 200);
      assert.equal((await send(base, tokens.deleter, 'GET', '/plants/9223372036854775807')).status, 200);
      assertRefused(
        await send(base, tokens.reader, 'POST', '/plants', '{"id":1,"name":"a"}'),
        403,
        'this token may not create plants: it lacks the plants:create scope',
        insufficient('plants:create'),
      );
      assertRefused(
        await send(base, tokens.reader, 'DELETE', '/plants/9223372036854775807'),
        403,
        'this token may not delete plants: it lacks the plants:delete scope',
        insufficient('plants:delete'),
      );
      assertRefused(
        await send(base, tokens.creator, 'GET', '/plants'),
        403,
        'this token may not read plants: it lacks the plants:read scope',
        insufficient('plants:read'),
      );
      assertRefused(
        await send(base, tokens.deleter, 'POST', '/plants', '{"id":2,"name":"b"}'),
        403,
        'this token may not create plants: it lacks the plants:create scope',
        insufficient('plants:create'),
      );
      assert.equal((await send(base, tokens.reader, 'GET', '/plants/1')).status, 404, 'the refused create stored nothing');
      assert.equal((await send(base, tokens.deleter, 'DELETE', '/plants/9223372036854775807')).status, 204);
    });

    it('answers 403 to a create without waiting for the body it declared, and closes the connection', async () => {
      // Within BODY_LIMIT_BYTES, and never sent: only a decision made before the body is read can answer at all.
      const response = await rawRequest(server.port, {
        parts: [
          `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tokens.reader}\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{"id":1,`,
        ],
        timeoutMs: 5000,
      });
      assertRawErrorRecord(response, 403, 'this token may not create plants: it lacks the plants:create scope');
      assert.equal(response.headers['www-authenticate'], insufficient('plants:create'));
      assert.equal(response.headers.connection, 'close');
    });

    it('refuses a token from its expiry on while the server runs, and lists it as expired', async () => {
      // Written straight to the database, a few seconds out: `token create` refuses anything under a minute.
      const store = await openStore(loadConfig(env).database);
      const token = generateToken();
      const expiresAt = new Date(Math.ceil((Date.now() + 2500) / 1000) * 1000);
      try {
        await store.tokens.add(newToken('brief', hashToken(token), { scopes: ['plants:read'], expiresAt }));
      } finally {
        await store.close();
      }
      assert.equal((await send(server.base, token, 'GET', '/plants')).status, 200);
      let answer: Answer;
      for (;;) {
        answer = await send(server.base, token, 'GET', '/plants');
        if (answer.status !== 200) break;
        assert.ok(Date.now() < expiresAt.getTime() + 1000, 'still accepted a second after its expiry');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.ok(Date.now() >= expiresAt.getTime(), 'refused before its expiry');
      assertRefused(answer, 401, 'the token has expired', EXPIRED_CHALLENGE);
      assert.deepEqual(listed(env).get('brief')?.slice(2), ['scopes plants:read', `expired ${expiresAt.toISOString().replace('.000Z', 'Z')}`]);
    });
  });

  describe(`tokens of a database made before scopes existed, on ${database.kind}`, () => {
    let db: TestDatabase;
    let server: ServerProcess | undefined;

    before(async () => {
      db = await database.create();
    });
    after(async () => {
      await server?.kill();
      await db?.cleanup();
    });

    it('keep working for every operation, with all three scopes and no expiry, once plantstore has migrated', async () => {
      const token = await databaseOfSchemaVersion3(database.kind, db.url);
      const env = { DATABASE_URL: db.url };
      server = await startServer(env);
      assert.equal((await send(server.base, token, 'POST', '/plants', '{"id":-9223372036854775808,"name":"Fern"}')).status, 200);
      assert.equal((await send(server.base, token, 'GET', '/plants/-9223372036854775808')).status, 200);
      assert.equal((await send(server.base, token, 'GET', '/plants')).status, 200);
      assert.equal((await send(server.base, token, 'DELETE', '/plants/-9223372036854775808')).status, 204);
      const [created, lastUsed, scopes, expiry] = listed(env).get('old') ?? [];
      assert.equal(created, 'created 2025-06-01T12:00:00.000Z');
      assert.match(lastUsed ?? '', /^last used 20/);
      assert.equal(scopes, 'scopes plants:read,plants:create,plants:delete');
      assert.equal(expiry, 'expires never');
    });
  });
}
