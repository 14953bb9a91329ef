import { TooManyRequestsError } from './errors.js';

/**
 * How many event streams (`GET /plants/events`) one token and one client address may hold open at once in this
 * thread. A stream holds its connection for as long as it lasts, so streams already count against the instance's
 * connection bound (MAX_CONNECTIONS); these keep one client from taking that bound's whole share with streams.
 * Kept here rather than in the connection bounds: it is a rule of one route, counted per request, not per socket.
 */
export class StreamLimits {
  readonly #perToken: number;
  readonly #perAddress: number;
  readonly #byToken = new Map<string, number>();
  readonly #byAddress = new Map<string, number>();

  constructor(perToken: number, perAddress: number) {
    this.#perToken = perToken;
    this.#perAddress = perAddress;
  }

  /** Counts one more stream for `token` and `address`, or refuses it (429); the function returned uncounts it, once. */
  open(token: string, address: string): () => void {
    const tokenCount = this.#byToken.get(token) ?? 0;
    const addressCount = this.#byAddress.get(address) ?? 0;
    if (tokenCount >= this.#perToken) throw new TooManyRequestsError(5, `this token holds ${tokenCount} event streams open already, the most it may`);
    if (addressCount >= this.#perAddress) throw new TooManyRequestsError(5, `this address holds ${addressCount} event streams open already, the most it may`);
    this.#byToken.set(token, tokenCount + 1);
    this.#byAddress.set(address, addressCount + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      decrement(this.#byToken, token);
      decrement(this.#byAddress, address);
    };
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const count = (counts.get(key) ?? 1) - 1;
  if (count <= 0) counts.delete(key);
  else counts.set(key, count);
}
