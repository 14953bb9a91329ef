/**
 * TokenAuthenticator's record of last uses at shutdown (issue 37 item 9), against an in-memory token store whose
 * writes the test settles by hand: stop() waits for a refresh's write in flight (the store is closed right after it),
 * and uses whose write failed before the stop are written again at it, merged with later ones. Nothing here waits on
 * the clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { TokenAuthenticator } from '../../src/auth/authenticator.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { generateToken, hashToken } from '../../src/auth/tokens.js';
import type { StoredToken, TokenLookup } from '../../src/storage/token-store.js';

interface PendingWrite {
  readonly uses: ReadonlyMap<string, number>;
  succeed(): void;
  fail(error: Error): void;
}

/** Tokens in memory; each recordUse waits until the test settles it, and fails once the store is closed. */
class HeldWrites implements TokenLookup {
  /** Each token's last use as stored (ms since the epoch). */
  readonly lastUsed = new Map<string, number>();
  readonly writes: PendingWrite[] = [];
  #closed = false;
  #waiting: Array<() => void> = [];

  constructor(private readonly tokens: readonly StoredToken[]) {}

  find(hash: Buffer): Promise<StoredToken | undefined> {
    return Promise.resolve(this.tokens.find((token) => token.hash.equals(hash)));
  }

  all(): Promise<StoredToken[]> {
    return Promise.resolve([...this.tokens]);
  }

  recordUse(uses: ReadonlyMap<string, Date>): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('storage is closed'));
    let resolve = () => {};
    let reject = (_error: Error) => {};
    const promise = new Promise<void>((resolvePromise, rejectPromise) => {
      resolve = resolvePromise;
      reject = rejectPromise;
    });
    const times = new Map([...uses].map(([name, at]) => [name, at.getTime()]));
    this.writes.push({
      uses: times,
      succeed: () => {
        if (this.#closed) {
          reject(new Error('storage is closed'));
          return;
        }
        for (const [name, at] of times) this.lastUsed.set(name, Math.max(at, this.lastUsed.get(name) ?? -Infinity));
        resolve();
      },
      fail: reject,
    });
    for (const wake of this.#waiting.splice(0)) wake();
    return promise;
  }

  /**
   * The `count`th write (1 for the first), once it has been asked for. Rejects if it has not been after 10 s, which
   * is no bound on speed (it comes within a reload's spacing, 100 ms): a write that never comes fails the test.
   */
  async write(count: number): Promise<PendingWrite> {
    const gaveUp = setTimeout(() => {
      for (const wake of this.#waiting.splice(0)) wake();
    }, 10_000);
    try {
      while (this.writes.length < count) {
        const before = this.writes.length;
        await new Promise<void>((resolve) => this.#waiting.push(resolve));
        if (this.writes.length === before) throw new Error(`write ${count} of uses was never asked for`);
      }
    } finally {
      clearTimeout(gaveUp);
    }
    return this.writes[count - 1] as PendingWrite;
  }

  close(): void {
    this.#closed = true;
  }
}

function storedToken(name: string): { token: string; stored: StoredToken } {
  const token = generateToken();
  return { token, stored: { name, hash: hashToken(token), scopes: [...SCOPES], expiresAt: null } };
}

/** Lets every callback already due run (promise reactions and I/O callbacks included). */
async function turnTheLoop(): Promise<void> {
  for (let turn = 0; turn < 5; turn += 1) await new Promise((resolve) => setImmediate(resolve));
}

/** An authenticator as the server runs one (cached tokens), on a clock the test sets; the test runs each refresh itself. */
function authenticator(store: HeldWrites, clock: { now: number }): TokenAuthenticator {
  return new TokenAuthenticator(store, { refreshMs: 3_600_000, log: pino({ level: 'silent' }), now: () => clock.now });
}

describe('TokenAuthenticator: last uses at shutdown', () => {
  it('stop() waits for a refresh whose write is in flight, so the use is stored before the store closes', async () => {
    const a = storedToken('a');
    const store = new HeldWrites([a.stored]);
    const clock = { now: 1_000 };
    const auth = authenticator(store, clock);
    await auth.start();
    assert.equal(await auth.authenticate(a.token, 'plants:read'), 'a');
    const refreshing = auth.refresh();
    const inFlight = await store.write(1);
    assert.deepEqual([...inFlight.uses], [['a', 1_000]]);

    let stopped = false;
    const stopping = auth.stop().then(() => (stopped = true));
    await turnTheLoop();
    assert.equal(stopped, false, 'stop() resolved while a write of uses was in flight');
    inFlight.succeed();
    await stopping;
    store.close();
    await refreshing;
    assert.deepEqual([...store.lastUsed], [['a', 1_000]]);
    assert.equal(store.writes.length, 1, 'nothing left to write');
  });

  it('does not write again the uses of a write in flight at stop() that fails: one wait for a locked store, not two; the loss is logged', async () => {
    const a = storedToken('a');
    const store = new HeldWrites([a.stored]);
    const logged: string[] = [];
    const auth = new TokenAuthenticator(store, {
      refreshMs: 3_600_000,
      log: pino({ level: 'warn' }, { write: (line: string) => logged.push(line) }),
      now: () => 1_000,
    });
    await auth.start();
    await auth.authenticate(a.token, 'plants:read');
    const refreshing = auth.refresh();
    const failing = await store.write(1);
    const stopping = auth.stop();
    failing.fail(new Error('database is locked'));
    await stopping;
    await refreshing;
    assert.equal(store.writes.length, 1, 'no second write after the one that failed during the stop');
    assert.ok(logged.some((line) => line.includes('recording token use failed at shutdown')), logged.join(''));
  });

  it('puts back uses whose write failed, keeping the latest time of each token: the final write at stop() carries them', async () => {
    const a = storedToken('a');
    const b = storedToken('b');
    const c = storedToken('c');
    const store = new HeldWrites([a.stored, b.stored, c.stored]);
    const clock = { now: 1_000 };
    const auth = authenticator(store, clock);
    await auth.start();
    await auth.authenticate(a.token, 'plants:read');
    await auth.authenticate(b.token, 'plants:read');
    const refreshing = auth.refresh();
    const failing = await store.write(1);
    // Used again while the write is in flight: a later (the clock moved on), b earlier (the wall clock was set back), c first.
    clock.now = 2_000;
    await auth.authenticate(a.token, 'plants:read');
    clock.now = 500;
    await auth.authenticate(b.token, 'plants:read');
    await auth.authenticate(c.token, 'plants:read');
    failing.fail(new Error('database is locked'));
    await refreshing;

    const stopping = auth.stop();
    const retry = await store.write(2);
    assert.deepEqual(new Map(retry.uses), new Map([['a', 2_000], ['b', 1_000], ['c', 500]]));
    retry.succeed();
    await stopping;
    assert.equal(store.writes.length, 2);
  });

  it('stop() still resolves when the final write fails: the uses are lost, and it says so in the log, not by rejecting', async () => {
    const a = storedToken('a');
    const store = new HeldWrites([a.stored]);
    const auth = authenticator(store, { now: 1_000 });
    await auth.start();
    await auth.authenticate(a.token, 'plants:read');
    const stopping = auth.stop();
    (await store.write(1)).fail(new Error('disk I/O error'));
    await stopping;
    assert.equal(store.lastUsed.size, 0);
  });
});
