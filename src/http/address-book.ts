import type { Socket } from 'node:net';
import { ConnectionRequests } from './connection-bounds.js';
import type { RequestBounds } from './request-bounds.js';

/** Everything the connection admission (src/http/connection-admission.ts) knows of one client address. */
export interface Book {
  readonly address: string;
  readonly exempt: boolean;
  /** Its connections served; of them those idle after an answer, and those that have sent no request yet, oldest first. */
  readonly served: Set<Connection>;
  readonly idle: Set<Connection>;
  readonly fresh: Set<Connection>;
  /** Its connections waiting for a slot, oldest first. */
  readonly waiting: Waiting[];
}

export interface Waiting {
  readonly socket: Socket;
  readonly book: Book;
  readonly since: number;
  readonly serve: () => void;
}

/** One served connection: its slot, and (ConnectionRequests) what its requests hold. */
export class Connection extends ConnectionRequests {
  /** It no longer holds a slot: closed, or evicted and closing. */
  released = false;
  /**
   * Sweeps that have seen it: after two, the event loop has had a turn (a poll phase) since it was served, and has
   * read what its client sent as it connected.
   */
  sweeps = 0;
  /** Its current answer says `Connection: close`: its slot passes on to one waiting after it. */
  closing = false;
  /** When its last answer ended. */
  idleSince = 0;

  constructor(
    bounds: RequestBounds<Connection>,
    readonly socket: Socket,
    readonly book: Book,
  ) {
    super(bounds, book.address, socket);
  }
}
