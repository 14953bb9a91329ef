import { MARK, isCovered, syncFailure } from './wal-sync.js';

/**
 * The durable mark as a worker thread of an instance reads it: the main thread's WalSync writes it in shared memory
 * (the commits begun, the highest one durable, whether storage failed), and a worker's read of the same database file
 * on its own connection waits until every commit it could have seen is durable before it is answered. No message
 * crosses threads: the worker waits with Atomics.waitAsync and WalSync notifies after each sync.
 */
export class DurableMarkReader {
  readonly #cells: Int32Array;

  constructor(mark: SharedArrayBuffer) {
    this.#cells = new Int32Array(mark);
  }

  /**
   * Resolves once every commit begun before this call is durable (call it after a read, for what the read could have
   * seen); rejects with StorageUnavailableError once storage failed. Undefined when there is nothing to wait for.
   */
  durable(): Promise<void> | undefined {
    const cells = this.#cells;
    if (Atomics.load(cells, MARK.FAILED) !== 0) return Promise.reject(syncFailure());
    const seq = Atomics.load(cells, MARK.BEGUN);
    if (isCovered(Atomics.load(cells, MARK.DURABLE), seq)) return undefined;
    return this.#wait(seq);
  }

  async #wait(seq: number): Promise<void> {
    const cells = this.#cells;
    for (;;) {
      if (Atomics.load(cells, MARK.FAILED) !== 0) throw syncFailure();
      const durable = Atomics.load(cells, MARK.DURABLE);
      if (isCovered(durable, seq)) return;
      const wait = Atomics.waitAsync(cells, MARK.DURABLE, durable);
      if (wait.async) await wait.value;
    }
  }
}
