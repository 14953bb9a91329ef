import type { ServerResponse } from 'node:http';
import type { Book, Connection } from './address-book.js';

/**
 * Which served connection gives way to one waiting when the instance is full (src/http/connection-admission.ts): an
 * idle one, closed at once, or a busy one, told to close after its answer.
 */

/**
 * How long a connection idle after an answer is left to its client before it may be closed for one waiting: a client
 * with more to send reuses it the moment its answer arrives, and would see it closed under its next request. Not a
 * share of anyone's time: a connection busy when others start waiting is told to close after its answer instead.
 */
const REUSE_GRACE_MS = 20;

function first<T>(set: Set<T>): T | undefined {
  for (const item of set) return item;
  return undefined;
}

/**
 * The idle connection to close so that one of `book`'s can be served: its own address's longest idle keep-alive one,
 * else the longest idle of the address (of `books`) holding the most connections, if it holds more than `book` would
 * with one more.
 */
export function connectionToEvict(book: Book, books: Iterable<Book>): Connection | undefined {
  // Of its own address, only one idle after an answer: its client has moved on to the new connection. One that has
  // sent nothing is no more use than the newcomer, and replacing it would let an address that opens silent
  // connections churn its own for ever, none old enough to be taken for anyone else.
  let victim = evictable(book, false);
  if (!victim) {
    let heaviest: Book | undefined;
    for (const other of books) {
      if (other.exempt || other.served.size <= book.served.size + 1 || (heaviest && other.served.size <= heaviest.served.size)) continue;
      const candidate = evictable(other, true);
      if (candidate) {
        heaviest = other;
        victim = candidate;
      }
    }
  }
  return victim;
}

/**
 * The book's idle connection to close first: the longest idle after an answer (past REUSE_GRACE_MS), else the oldest
 * that has sent nothing, once the event loop has had a turn to read it (a client sends its request as it connects,
 * so one admitted an instant ago is idle only because it has not been read yet).
 */
function evictable(book: Book, fresh: boolean): Connection | undefined {
  const idle = first(book.idle);
  if (idle && performance.now() - idle.idleSince >= REUSE_GRACE_MS) return idle;
  return fresh ? seenTwice(book) : undefined;
}

function seenTwice(book: Book): Connection | undefined {
  const fresh = first(book.fresh);
  return fresh !== undefined && fresh.sweeps >= 2 ? fresh : undefined;
}

/**
 * Whether `connection` should give its slot to a waiting one after its current answer: its address has some
 * waiting, or holds more connections than a waiting address (of `waitingTurns`) would with this slot.
 */
export function shouldYield(connection: Connection, waitingTurns: Iterable<Book>): boolean {
  if (connection.closing) return false;
  const { book } = connection;
  if (book.waiting.length > 0) return true;
  if (book.exempt) return false;
  for (const other of waitingTurns) if (other.served.size + 1 < book.served.size) return true;
  return false;
}

/**
 * The busy connection to tell to close after its answer for one of `book`'s waiting: one of its own address, else of
 * the address (of `books`) holding the most, whose answer has not begun (the idle ones were looked at as it was
 * accepted).
 */
export function connectionToClose(book: Book, books: Iterable<Book>): { readonly connection: Connection; readonly response: ServerResponse } | undefined {
  let heaviest: Book | undefined;
  for (const other of books) {
    if (other.exempt || other.served.size <= book.served.size + 1 || (heaviest && other.served.size <= heaviest.served.size)) continue;
    heaviest = other;
  }
  for (const candidate of heaviest ? [book, heaviest] : [book]) {
    for (const connection of candidate.served) {
      if (connection.closing || connection.handled.size === 0) continue;
      for (const response of connection.handled.values()) {
        if (response.headersSent) continue;
        return { connection, response };
      }
    }
  }
  return undefined;
}
