/**
 * Calls between the main thread and a worker thread, each one message and one reply, in both directions over the
 * one port a worker has to its parent. What each side may ask is declared as an operation map; errors cross as
 * WireErrors (./wire.ts) and are thrown again as the class they had.
 */
import { fromWireError, toWireError, type WireError } from './wire.js';

/** Each operation's argument and answer. */
export type Operations = Record<string, readonly [argument: unknown, answer: unknown]>;

export type Handlers<In extends Operations> = { readonly [K in keyof In]: (argument: In[K][0]) => In[K][1] | Promise<In[K][1]> };

interface CallMessage {
  readonly kind: 'call';
  readonly call: number;
  readonly op: string;
  readonly argument: unknown;
}

type ReplyMessage =
  | { readonly kind: 'reply'; readonly call: number; readonly answer: unknown }
  | { readonly kind: 'reply'; readonly call: number; readonly error: WireError };

interface Pending {
  readonly resolve: (answer: unknown) => void;
  readonly reject: (error: Error) => void;
}

/** One side's end: it calls the other side's operations (Out) and answers the other side's calls of its own (In). */
export class Endpoint<Out extends Operations, In extends Operations> {
  readonly #send: (message: object) => void;
  readonly #handlers: Handlers<In>;
  readonly #pending = new Map<number, Pending>();
  #nextCall = 1;
  #gone: Error | undefined;

  constructor(send: (message: object) => void, handlers: Handlers<In>) {
    this.#send = send;
    this.#handlers = handlers;
  }

  call<K extends keyof Out & string>(op: K, argument: Out[K][0]): Promise<Out[K][1]> {
    if (this.#gone) return Promise.reject(this.#gone);
    const call = this.#nextCall++;
    return new Promise((resolve, reject) => {
      this.#pending.set(call, { resolve: resolve as (answer: unknown) => void, reject });
      this.#send({ kind: 'call', call, op, argument } satisfies CallMessage);
    });
  }

  /** Takes a message from the other side: true when it was a call or a reply, false when it is for someone else. */
  receive(message: unknown): boolean {
    const kind = (message as { kind?: unknown } | null)?.kind;
    if (kind === 'reply') {
      const reply = message as ReplyMessage;
      const pending = this.#pending.get(reply.call);
      if (pending === undefined) return true;
      this.#pending.delete(reply.call);
      if ('error' in reply) pending.reject(fromWireError(reply.error));
      else pending.resolve(reply.answer);
      return true;
    }
    if (kind === 'call') {
      void this.#serve(message as CallMessage);
      return true;
    }
    return false;
  }

  /** The other side is gone (a worker exited): every call waiting for a reply fails, and so does every later one. */
  fail(error: Error): void {
    this.#gone = error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }

  async #serve({ call, op, argument }: CallMessage): Promise<void> {
    let reply: ReplyMessage;
    try {
      const handler = this.#handlers[op as keyof In];
      if (handler === undefined) throw new Error(`no operation ${JSON.stringify(op)}`);
      reply = { kind: 'reply', call, answer: await handler(argument as In[keyof In][0]) };
    } catch (error) {
      reply = { kind: 'reply', call, error: toWireError(error) };
    }
    if (!this.#gone) this.#send(reply);
  }
}
