import type { Socket } from 'node:net';

/** Why a connection was answered 503 instead of being served. */
export type Refusal = 'queue full' | 'waited too long' | 'address overran';

/** How long a refused or evicted connection is left to read what it was sent before it is destroyed. */
export const LINGER_MS = 1000;

/**
 * The connections the admission (src/http/connection-admission.ts) refuses: each answered 503 unread, and left to
 * linger a while so that the answer reaches its client.
 */
export class ConnectionRefusals {
  readonly #limits: { readonly connections: number; readonly queued: number };
  readonly #refused: (address: string, why: Refusal) => void;
  readonly #refusal: (why: Refusal) => string | undefined;
  #lingering = 0;

  /**
   * `refusal` is the whole HTTP answer a refused connection gets, by why it is refused; undefined (with TLS, where
   * nothing can be said before a handshake) closes it unanswered.
   */
  constructor(
    limits: { readonly connections: number; readonly queued: number },
    refused: (address: string, why: Refusal) => void,
    refusal: (why: Refusal) => string | undefined,
  ) {
    this.#limits = limits;
    this.#refused = refused;
    this.#refusal = refusal;
  }

  /**
   * Answers 503 without reading the request, and half-closes. The request is then read and dropped until the client
   * closes, for at most LINGER_MS: closing a socket with unread bytes in its receive buffer makes the kernel send a
   * reset, which can reach the client before the answer does. Refused connections lingering at once are bounded by
   * `connections` + `queued`; past it, one is closed at once (an attack, not a client to tell anything).
   */
  refuse(socket: Socket, address: string, why: Refusal): void {
    this.#refused(address, why);
    const answer = this.#refusal(why);
    if (answer === undefined || this.#lingering >= this.#limits.connections + this.#limits.queued) {
      socket.destroy();
      return;
    }
    this.#lingering += 1;
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
    socket.once('close', () => {
      this.#lingering -= 1;
      clearTimeout(timer);
    });
    socket.on('data', () => undefined);
    socket.on('end', () => socket.destroy());
    socket.end(answer);
    socket.resume();
  }
}
