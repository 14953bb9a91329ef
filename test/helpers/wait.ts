import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** Give up after this long; 10 s unless told. */
  readonly timeoutMs?: number;
  /** The pause between checks; 10 ms unless told. A check that costs something (a request) deserves a longer one. */
  readonly intervalMs?: number;
}

/**
 * Polls `check` until it holds and resolves with how long that took, in milliseconds; rejects, naming `what`, once
 * `timeoutMs` has passed without it. For conditions nothing announces: a count reaching a number, an answer changing.
 */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, options: WaitOptions = {}): Promise<number> {
  const { timeoutMs = 10_000, intervalMs = 10 } = options;
  const started = performance.now();
  for (;;) {
    if (await check()) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}: not within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}
