/**
 * `npm run bench -- --app-only`: plantstore's whole HTTP application (`buildApp`: Fastify, auth, exact JSON parsing,
 * validation, group commit, serialization, logging at info) on a store that keeps nothing and answers every batch at
 * once. It is not a product and has no durability; it prices the HTTP layer alone, so the bench can show how much
 * of the gap to the ceiling is the framework and how much is storage.
 *
 * Env: PORT (default 0: any), BENCH_TOKEN (required). Prints "listening <port>" once ready.
 */
import { buildApp } from '../src/app.js';
import { hashToken } from '../src/auth/tokens.js';
import { loadConfig } from '../src/config/config.js';
import { createLogger } from '../src/observability/log.js';
import { startServices } from '../src/services.js';
import { SCOPES } from '../src/auth/scopes.js';
import type { Store } from '../src/storage/store.js';
import type { CreateOutcome } from '../src/storage/plant-store.js';
import type { Plant } from '../src/plant.js';
import type { StoredToken } from '../src/storage/token-store.js';

const token = process.env.BENCH_TOKEN;
if (!token) {
  process.stderr.write('app-only: BENCH_TOKEN is required\n');
  process.exit(2);
}
const benchToken: StoredToken = { name: 'bench', hash: hashToken(token), scopes: SCOPES, expiresAt: null };
const unsupported = () => Promise.reject(new Error('the app-only bench server only creates plants'));

/** Answers creates at once and stores nothing; everything but creates and token checks is refused. */
const nothingStore: Store = {
  kind: 'sqlite',
  writeConcurrency: 1,
  plants: {
    create: (plants: readonly Plant[]) => Promise.resolve(plants.map((): CreateOutcome => ({ kind: 'created' }))),
    get: unsupported,
    list: unsupported,
    delete: unsupported,
  },
  checkWritable: () => Promise.resolve(),
  // No feed: nothing is ever recorded.
  changes: {
    changesAfter: () => Promise.resolve([]),
    newestSequence: () => Promise.resolve(0n),
    oldestRetained: () => Promise.resolve(undefined),
    pruneChanges: () => Promise.resolve(0),
  },
  tokens: {
    add: unsupported,
    list: () => Promise.resolve([{ name: benchToken.name, scopes: benchToken.scopes, createdAt: new Date(), expiresAt: null, lastUsedAt: null }]),
    revoke: unsupported,
    find: () => Promise.resolve(undefined),
    all: () => Promise.resolve([benchToken]),
    recordUse: () => Promise.resolve(),
    exportAll: unsupported,
    importAll: unsupported,
  },
  // No subscriptions: the dispatcher finds nothing to send.
  webhookSubscriptions: {
    add: unsupported,
    list: () => Promise.resolve([]),
    remove: unsupported,
    setEnabled: unsupported,
    rotateSecret: unsupported,
    deliveries: unsupported,
    redeliver: unsupported,
    exportAll: unsupported,
    importAll: unsupported,
  },
  webhookOutbox: {
    active: () => Promise.resolve([]),
    settleAndClaim: () => Promise.resolve({ claimed: [], disabled: [] }),
    releaseLeases: () => Promise.resolve(),
    countWaiting: () => Promise.resolve(0),
    prune: () => Promise.resolve(0),
  },
  onIncident: () => () => undefined,
  close: () => Promise.resolve(),
};

// The same configuration plantstore runs with by default; DATABASE_URL is required by the loader but never opened.
const config = loadConfig({ PORT: process.env.PORT ?? '0', DATABASE_URL: 'sqlite:./unused-by-app-only.db' });
const services = await startServices(config, nothingStore, createLogger(config));
const app = await buildApp(services);
await app.listen({ host: config.host, port: config.port });
const address = app.server.address();
process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : config.port}\n`);
const stop = () => void app.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
