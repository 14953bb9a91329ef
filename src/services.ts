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
  /**
   * Waits until every accepted write is answered, stops the token cache (writing the last uses) and stops logging
   * storage's incidents. The store stays open: whoever opened it closes it.
   */
  close(): Promise<void>;
}

export async function startServices(config: Config, store: Store, log: Logger): Promise<Services> {
  const writes = new WriteQueue(store, {
    queueLimit: config.writes.queueLimit,
    batchLimit: config.writes.batchLimit,
    concurrency: store.writeConcurrency,
  });
  // Storage has no logger of its own; what it notices outside requests (a background thread dying) is logged here.
  const stopHearingStorage = store.onIncident(({ level, message, error }) => log[level](error ? { err: error } : {}, message));
  const tokens = new TokenAuthenticator(store, config.tokenCacheMs, log);
  try {
    await tokens.start();
  } catch (error) {
    stopHearingStorage();
    throw error;
  }
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
        stopHearingStorage();
      })()),
  };
}
