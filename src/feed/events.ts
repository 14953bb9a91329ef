import { plantJson } from '../json/plant-json.js';
import type { PlantChange } from '../storage/change-store.js';

/**
 * The text of the feed's events, in the text/event-stream format (WHATWG HTML, "Server-sent events"): what
 * `GET /plants/events` writes. Made here, once per change, by the event loop's ChangeFeed for all its streams.
 */

/** The event of one change, rendered once for every stream: the feed's `render`. */
export function changeEvent(change: PlantChange): string {
  return change.kind === 'created'
    ? `event: plant.created\nid: ${change.sequence}\ndata: ${plantJson(change.plant)}\n\n`
    : `event: plant.deleted\nid: ${change.sequence}\ndata: {"id":${change.id}}\n\n`;
}

export const RESET_MESSAGE =
  'changes after your cursor are no longer kept (or this store never had them): list the store again (GET /plants), then go on from this event';

/** The event a stream whose cursor is older than the retained changes (or unknown to this store) gets once. */
export function resetEvent(newest: bigint): string {
  return `event: reset\nid: ${newest}\ndata: ${JSON.stringify({ message: RESET_MESSAGE })}\n\n`;
}


/**
 * The last event of a stream whose token is refused from now on (revoked, expired, or without the scope): its data is
 * the Error record a new request with the token gets, its id the stream's cursor (a reconnection resumes there).
 */
export function refusedEvent(cursor: bigint, record: { readonly error: number; readonly message: string }): string {
  return `event: token-refused\nid: ${cursor}\ndata: ${JSON.stringify(record)}\n\n`;
}
