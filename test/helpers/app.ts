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
  /** The URL of the database it runs on, for another app or a store of the test's own on the same data. */
  readonly databaseUrl: string;
  /** A valid token, and its name (unique, so several apps can share one database). */
  readonly token: string;
  readonly tokenName: string;
  /** Headers for an authenticated JSON request. */
  readonly headers: Record<string, string>;
  close(): Promise<void>;
}

/**
 * The database a test app runs on: the URL of one the test owns (several apps may share it), or how to make a fresh
 * one (sqliteDatabase, a DATABASES entry's create), removed when the app closes.
 */
export type TestAppDatabase = string | (() => Promise<TestDatabase>);

/**
 * How the app (its clock), the services (the webhook resolver, the poll intervals) and its log start; `openStore`, a
 * store opened otherwise than the configuration says (a SQLite store with other checkpointer settings); `beforeReady`,
 * what the test adds to the app before it is ready (a hook that observes each request).
 */
export type TestAppOptions = AppOptions &
  ProcessOptions &
  MainLoopOptions & {
    readonly log?: Logger;
    readonly openStore?: (config: Config) => Store | Promise<Store>;
    readonly beforeReady?: (app: FastifyInstance) => void;
  };

/**
 * The app, in-process, on `database`, with one token; `env` overrides configuration variables. The caller closes it;
 * a test or a suite that needs it for its own length takes buildTestApp or useTestApp instead.
 */
export async function startTestApp(database: TestAppDatabase, env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const db = typeof database === 'string' ? { url: database, cleanup: async () => {} } : await database();
  try {
    const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: db.url, ...env });
    const store = await (options.openStore ?? ((opened) => openStore(opened.database)))(config);
    const token = generateToken();
    const tokenName = `test-${randomUUID()}`;
    await store.tokens.add(newToken(tokenName, hashToken(token)));
    const services = await startServices(config, store, options.log ?? createLogger(config), options);
    const app = await buildApp(services, options);
    options.beforeReady?.(app);
    await app.ready();
    return {
      app,
      store,
      config,
      services,
      databaseUrl: db.url,
      token,
      tokenName,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      close: async () => {
        await app.close();
        await services.close();
        await store.close();
        await db.cleanup();
      },
    };
  } catch (error) {
    // The start's own failure is the one to report, not a removal it may have left impossible (a store still open).
    await db.cleanup().catch(() => undefined);
    throw error;
  }
}

/**
 * startTestApp for one test, closed by the test itself once it is done, passed or failed (as fastify/demo's
 * `build(t)`): `const t = await buildTestApp(context, sqliteDatabase)` in `it('...', async (context) => ...)`.
 */
export async function buildTestApp(
  context: Pick<TestContext, 'after'>,
  database: TestAppDatabase,
  env: Record<string, string> = {},
  options: TestAppOptions = {},
): Promise<TestApp> {
  const t = await startTestApp(database, env, options);
  context.after(() => t.close());
  return t;
}

/**
 * startTestApp for a suite: started before its first test and closed after its last (with the database, when made
 * here). Call it in the describe() body: `const t = useTestApp(sqliteDatabase, env)`; its fields are the started
 * app's, readable from the suite's tests and later hooks on. node:test runs after() hooks in the order they were
 * added, so the app is closed before the suite's own: a connection of the test's own to its database ends in the test.
 */
export function useTestApp(database: TestAppDatabase, env: Record<string, string> = {}, options: TestAppOptions = {}): TestApp {
  let started: TestApp | undefined;
  before(async () => {
    started = await startTestApp(database, env, options);
  });
  after(() => started?.close());
  const app = (): TestApp => {
    if (!started) throw new Error("useTestApp: the app starts in the suite's before hook; use it from the tests and later hooks");
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
    get databaseUrl() {
      return app().databaseUrl;
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
    close: () => app().close(),
  };
}
