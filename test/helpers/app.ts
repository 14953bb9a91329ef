import { randomUUID } from 'node:crypto';
import { after, before, type TestContext } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp, type AppOptions } from '../../src/app.js';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { openStore } from '../../src/storage/open.js';
import { createLogger } from '../../src/observability/log.js';
import { startServices, type MainLoopOptions, type MainServices, type ProcessOptions } from '../../src/services.js';
import type { Store } from '../../src/storage/store.js';
import type { TestDatabase } from './databases.js';
import { newToken } from './tokens.js';

export interface TestApp {
  readonly app: FastifyInstance;
  readonly store: Store;
  readonly config: Config;
  /** What the app is built on (the write queue, the plant service, the token cache, readiness) and the webhook dispatcher. */
  readonly services: MainServices;
  /** A valid token, and its name (unique, so several apps can share one database). */
  readonly token: string;
  readonly tokenName: string;
  /** Headers for an authenticated JSON request. */
  readonly headers: Record<string, string>;
  close(): Promise<void>;
}

/**
 * The app, in-process, on the given database, with one token; `env` overrides configuration variables, `options` how
 * the app (its clock) and services (the webhook resolver) start. The caller closes it; a test that needs it for its
 * own length only takes buildTestApp instead.
 */
export async function startTestApp(
  databaseUrl: string,
  env: Record<string, string> = {},
  options: AppOptions & ProcessOptions & MainLoopOptions & { readonly log?: Logger } = {},
): Promise<TestApp> {
  const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: databaseUrl, ...env });
  const store = await openStore(config.database);
  const token = generateToken();
  const tokenName = `test-${randomUUID()}`;
  await store.tokens.add(newToken(tokenName, hashToken(token)));
  const services = await startServices(config, store, options.log ?? createLogger(config), options);
  const app = await buildApp(services, options);
  await app.ready();
  return {
    app,
    store,
    config,
    services,
    token,
    tokenName,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    close: async () => {
      await app.close();
      await services.close();
      await store.close();
    },
  };
}

/**
 * startTestApp for one test, closed by the test itself once it is done, passed or failed (as fastify/demo's
 * `build(t)`): `const t = await buildTestApp(context, db.url)` in `it('...', async (context) => ...)`.
 */
export async function buildTestApp(
  context: Pick<TestContext, 'after'>,
  databaseUrl: string,
  env: Record<string, string> = {},
  options: AppOptions & ProcessOptions & MainLoopOptions = {},
): Promise<TestApp> {
  const t = await startTestApp(databaseUrl, env, options);
  context.after(() => t.close());
  return t;
}

/**
 * The before/after block of a suite that runs its tests on one app: a fresh database from `database`
 * (sqliteDatabase, or a DATABASES entry's create) and startTestApp on it before the suite's first test, both closed
 * and removed after its last. Call it in the describe() body, where `let t: TestApp` and its before/after hooks were:
 * `const t = useTestApp(sqliteDatabase)`. Its fields are the started app's (and `database`, the database it runs on),
 * readable from the suite's tests and later hooks on.
 */
export function useTestApp(
  database: () => Promise<TestDatabase>,
  env: Record<string, string> = {},
  options: AppOptions & ProcessOptions & MainLoopOptions & { readonly log?: Logger } = {},
): TestApp & { readonly database: TestDatabase } {
  let db: TestDatabase | undefined;
  let started: TestApp | undefined;
  before(async () => {
    db = await database();
    started = await startTestApp(db.url, env, options);
  });
  after(async () => {
    await started?.close();
    await db?.cleanup();
  });
  const app = (): TestApp => {
    if (!started) throw new Error('useTestApp: the app starts in the suite\'s before hook; use it from the tests and later hooks');
    return started;
  };
  return {
    get app() {
      return app().app;
    },
    get store() {
      return app().store;
    },
    get config() {
      return app().config;
    },
    get services() {
      return app().services;
    },
    get token() {
      return app().token;
    },
    get tokenName() {
      return app().tokenName;
    },
    get headers() {
      return app().headers;
    },
    get database() {
      if (!db) throw new Error('useTestApp: the database is made in the suite\'s before hook');
      return db;
    },
    close: () => app().close(),
  };
}
