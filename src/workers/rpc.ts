/**
 * Calls between the main thread and a worker thread, each one message and one reply, in both directions over the
 * one port a worker has to its parent. What each side may ask is declared as an operation map, with a check of each
 * operation's argument and answer (./message-checks.ts) run as the message arrives; errors cross as WireErrors
 * (./wire.ts) and are thrown again as the class they had.
 */
import { fromWireError, isWireError, toWireError, type WireError } from './wire.js';

/** Each operation's argument and answer. */
export type Operations = Record<string, readonly [argument: unknown, answer: unknown]>;

export type Handlers<In extends Operations> = { readonly [K in keyof In]: (argument: In[K][0]) => In[K][1] | Promise<In[K][1]> };

/** A message between the threads of an instance that is not what its kind says: a bug on the side that sent it. */
export class MalformedMessageError extends Error {
  override readonly name = 'MalformedMessageError';
}

type Check<T> = (value: unknown) => value is T;

/** Per operation, the check of its argument (where the call is served) and of its answer (where the reply arrives). */
export type OperationChecks<Ops extends Operations> = {
  readonly [K in keyof Ops]: { readonly argument: Check<Ops[K][0]>; readonly answer: Check<Ops[K][1]> };
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

const isCallNumber = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

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
  readonly op: string;
  readonly resolve: (answer: unknown) => void;
  readonly reject: (error: Error) => void;
}

/** One side's end: it calls the other side's operations (Out) and answers the other side's calls of its own (In). */
export class Endpoint<Out extends Operations, In extends Operations> {
  readonly #send: (message: object) => void;
  readonly #handlers: Handlers<In>;
  readonly #checks: { readonly outgoing: OperationChecks<Out>; readonly incoming: OperationChecks<In> };
  readonly #pending = new Map<number, Pending>();
  #nextCall = 1;
  #gone: Error | undefined;

  /** `checks`: the other side's operations (their answers are checked here) and this side's (their arguments). */
  constructor(send: (message: object) => void, handlers: Handlers<In>, checks: { readonly outgoing: OperationChecks<Out>; readonly incoming: OperationChecks<In> }) {
    this.#send = send;
    this.#handlers = handlers;
    this.#checks = checks;
  }

  call<K extends keyof Out & string>(op: K, argument: Out[K][0]): Promise<Out[K][1]> {
    if (this.#gone) return Promise.reject(this.#gone);
    const call = this.#nextCall++;
    return new Promise((resolve, reject) => {
      // The answer is checked as Out[K][1] before it resolves (receive).
      this.#pending.set(call, { op, resolve: resolve as (answer: unknown) => void, reject });
      this.#send({ kind: 'call', call, op, argument } satisfies CallMessage);
    });
  }

  /**
   * Takes a message from the other side: true when it was a call or a reply, false when it is for someone else. A
   * call whose operation is unknown or whose argument fails its check is answered with a MalformedMessageError; a
   * reply whose answer fails its check rejects its call with one; a call or reply without its number throws one.
   */
  receive(message: unknown): boolean {
    if (!isObject(message) || (message.kind !== 'reply' && message.kind !== 'call')) return false;
    const { kind, call } = message;
    if (!isCallNumber(call)) throw new MalformedMessageError(`a ${kind} without a call number`);
    if (kind === 'reply') {
      const pending = this.#pending.get(call);
      if (pending === undefined) return true;
      this.#pending.delete(call);
      if ('error' in message) {
        const { error } = message;
        if (isWireError(error)) pending.reject(fromWireError(error));
        else pending.reject(new MalformedMessageError(`the reply to ${pending.op} carries an error that is not a WireError`));
      } else if (this.#checks.outgoing[pending.op]?.answer(message.answer)) pending.resolve(message.answer);
      else pending.reject(new MalformedMessageError(`the reply to ${pending.op} is not its answer`));
      return true;
    }
    void this.#serve(call, message.op, message.argument);
    return true;
  }

  /** The other side is gone (a worker exited): every call waiting for a reply fails, and so does every later one. */
  fail(error: Error): void {
    this.#gone = error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }

  async #serve(call: number, op: unknown, argument: unknown): Promise<void> {
    let reply: ReplyMessage;
    try {
      if (typeof op !== 'string' || !Object.hasOwn(this.#handlers, op)) throw new MalformedMessageError(`no operation ${JSON.stringify(op)}`);
      const handler = this.#handlers[op as keyof In & string];
      if (!this.#checks.incoming[op]?.argument(argument)) throw new MalformedMessageError(`the argument of ${op} is not what it takes`);
      reply = { kind: 'reply', call, answer: await handler(argument) };
    } catch (error) {
      reply = { kind: 'reply', call, error: toWireError(error) };
    }
    if (!this.#gone) this.#send(reply);
  }
}
