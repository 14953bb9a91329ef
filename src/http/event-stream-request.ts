import { BadRequestError } from './errors.js';

/** What a request for a stream (`GET /plants/events`) asks for: its cursor, and whether it accepts one. */

export const EVENT_STREAM = 'text/event-stream';

const CURSOR = /^(0|[1-9][0-9]{0,18})$/;

/** A cursor (Last-Event-ID or `after`): a non-negative decimal integer within int64, or a 400 naming where it came from. */
export function parseCursor(text: string, where: string): bigint {
  if (CURSOR.test(text)) {
    const value = BigInt(text);
    if (value <= 9223372036854775807n) return value;
  }
  throw new BadRequestError(`${where} must be a non-negative integer (an event id of this stream) in canonical decimal`);
}

/**
 * Whether an Accept header lets the answer be text/event-stream: absent, or naming it, text/* or *\/* with a
 * non-zero q. Parameters other than q are ignored.
 */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  return accept.split(',').some((range) => {
    const [type = '', ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    if (type !== EVENT_STREAM && type !== 'text/*' && type !== '*/*') return false;
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}
