import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * When a stream request (GET /plants/events) pipelined on a connection may be answered. Node queues the answers of
 * one connection in order and hands a pipelined response its socket only once the answer before it is written, so a
 * stream, whose events go to the socket itself, must wait for that before it takes anything (a stream slot, a
 * starting point). A stream holds its connection until the connection closes: what is pipelined behind one is
 * never answered.
 */

/** 'now': the request has the socket; 'closed': its connection closed first; 'behind a stream': it never will. */
export type Turn = 'now' | 'closed' | 'behind a stream';

export class StreamTurns {
  /** The connections a stream holds. */
  readonly #carrying = new WeakSet<Socket>();
  /** Stream requests pipelined behind another answer, by connection, told when a stream starts ahead of them. */
  readonly #waiting = new Map<Socket, Set<() => void>>();

  /**
   * When a stream request may be answered, holding nothing before: 'now' for a connection's only request, or once Node
   * hands a pipelined one the socket (the answer before it has been written); 'closed' when the connection closes
   * first (an earlier answer said `Connection: close`, or the client left); 'behind a stream' when a stream holds the
   * connection ahead of it, which ends only with the connection: such a request is never answered, and must hold no
   * stream slot and no pending place while it waits for that close.
   */
  turn(request: IncomingMessage, response: ServerResponse): Promise<Turn> {
    const connection = request.socket;
    if (response.socket !== null || connection.destroyed) return Promise.resolve(connection.destroyed ? 'closed' : 'now');
    if (this.#carrying.has(connection)) return Promise.resolve('behind a stream');
    return new Promise((resolve) => {
      let waiters = this.#waiting.get(connection);
      if (waiters === undefined) this.#waiting.set(connection, (waiters = new Set()));
      const settle = (outcome: Turn) => {
        response.off('socket', assigned);
        connection.off('close', closed);
        waiters.delete(behind);
        if (waiters.size === 0) this.#waiting.delete(connection);
        resolve(outcome);
      };
      const assigned = () => settle('now');
      const closed = () => settle('closed');
      const behind = () => settle('behind a stream');
      response.once('socket', assigned);
      connection.once('close', closed);
      waiters.add(behind);
    });
  }

  /** A stream now holds `socket`: the stream requests waiting behind it are told they are behind a stream. */
  streamStarted(socket: Socket): void {
    this.#carrying.add(socket);
    for (const behind of [...(this.#waiting.get(socket) ?? [])]) behind();
  }
}
