/**
 * One unreferenced timer that runs `fire` once, at the soonest of the times asked for since it last fired: asking for
 * a later time than the one set changes nothing, an earlier one moves it.
 */
export class SoonestTimer {
  readonly #fire: () => void;
  #timer: NodeJS.Timeout | undefined;
  #at = Infinity;

  constructor(fire: () => void) {
    this.#fire = fire;
  }

  /** Fires in `delayMs` at the latest. */
  atMost(delayMs: number): void {
    const at = performance.now() + delayMs;
    if (this.#timer !== undefined && this.#at <= at) return;
    this.cancel();
    this.#at = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#at = Infinity;
      this.#fire();
    }, delayMs);
    this.#timer.unref();
  }

  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Infinity;
  }
}
