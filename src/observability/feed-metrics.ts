import { Counter, Gauge, type Registry } from 'prom-client';
import type { StreamEnd } from '../feed/change-feed.js';

const STREAM_ENDS: readonly StreamEnd[] = ['client', 'slow', 'shutdown', 'error', 'refused'];

/**
 * The change feed's streams: open now, events sent and the socket writes that carried them, resets sent, streams
 * ended by why (counted in plain numbers).
 */
export interface FeedCounts {
  open: number;
  events: number;
  writes: number;
  resets: number;
  readonly ended: Record<StreamEnd, number>;
}

export function feedCounts(): FeedCounts {
  return { open: 0, events: 0, writes: 0, resets: 0, ended: { client: 0, slow: 0, shutdown: 0, error: 0, refused: 0 } };
}

/** The event streams' families (GET /plants/events), read from `feed` when scraped. */
export function registerFeedMetrics(registers: Registry[], feed: FeedCounts): void {
  new Gauge({
    name: 'plantstore_event_streams_open',
    help: 'Event streams (GET /plants/events) open now',
    registers,
    collect() {
      this.set(feed.open);
    },
  });
  new Counter({
    name: 'plantstore_event_stream_events_total',
    help: 'Change events (plant.created, plant.deleted) written to event streams, each stream counting its own',
    registers,
    collect() {
      this.reset();
      this.inc(feed.events);
    },
  });
  new Counter({
    name: 'plantstore_event_stream_writes_total',
    help: 'Writes of change events to event streams\' sockets: what the fan-out costs the event loop, about one system call each',
    registers,
    collect() {
      this.reset();
      this.inc(feed.writes);
    },
  });
  new Counter({
    name: 'plantstore_event_stream_resets_total',
    help: 'reset events sent: streams whose cursor was older than the changes kept (FEED_RETENTION) or unknown to the store',
    registers,
    collect() {
      this.reset();
      this.inc(feed.resets);
    },
  });
  new Counter({
    name: 'plantstore_event_streams_closed_total',
    help: 'Event streams ended, by reason: client (it left), slow (its unread bytes passed FEED_STREAM_BUFFER_BYTES), shutdown, error (storage failed mid-stream), refused (its token was revoked, expired or lacks the scope)',
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset();
      for (const reason of STREAM_ENDS) this.inc({ reason }, feed.ended[reason]);
    },
  });
}
