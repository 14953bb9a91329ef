/** A clock that moves only when told: rate-limit buckets refill by it (AppOptions.now) without a test sleeping. */
export class FakeClock {
  #ms: number;

  constructor(startMs = 0) {
    this.#ms = startMs;
  }

  /** The time in milliseconds, as performance.now() would answer. */
  readonly now = (): number => this.#ms;

  advance(ms: number): void {
    this.#ms += ms;
  }
}
