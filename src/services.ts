import type { Logger } from 'pino';
import { TokenAuthenticator } from './auth/authenticator.js';
import type { Config } from './config.js';
import { Readiness } from './health/readiness.js';
import { PlantService } from './plants/service.js';
import type { Store } from './storage/store.js';
import { WriteQueue } from './storage/write-queue.js';

/**
 * Everything the service does, without a transport: the HTTP app (src/app.ts) is built on it, the entry
 * (src/server.ts) starts and closes it. It is the one owner of the write queue: it creates it here and drains it in
 * close(), before whoever opened the store closes that.
 */
export interface Services {
  readonly config: Config;
  readonly log: Logger;
  readonly store: Store;
  readonly writes: WriteQueue;
  readonly plants: PlantService;
  readonly tokens: TokenAuthenticator;
  readonly readiness: Readiness;
  /** Stops the token cache (writing the last uses) and waits until every accepted write is answered. The store stays open. */
  close(): Promise<void>;
}

export async function startServices(config: Config, store: Store, log: Logger): Promise<Services> {
  const writes = new WriteQueue(store, {
    queueLimit: config.writes.queueLimit,
    batchLimit: config.writes.batchLimit,
    concurrency: store.writeConcurrency,
  });
  const tokens = new TokenAuthenticator(store, config.tokenCacheMs, log);
  await tokens.start();
  let closing: Promise<void> | undefined;
  return {
    config,
    log,
    store,
    writes,
    plants: new PlantService(writes, store),
    tokens,
    readiness: new Readiness(store, writes),
    close: () =>
      (closing ??= (async () => {
        await writes.drain();
        await tokens.stop();
      })()),
  };
}
