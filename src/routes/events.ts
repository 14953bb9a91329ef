import { Type } from 'typebox';
import type { FastifyRequest } from 'fastify';
import type { TokenWatch } from '../auth/authenticator.js';
import { stopCountingAsPending } from '../http/connection-bounds.js';
import { acceptsEventStream, EVENT_STREAM, parseCursor } from '../http/event-stream-request.js';
import type { EventStreams } from '../http/event-stream.js';
import { NotAcceptableError } from '../http/errors.js';
import { typedRoute, type RouteSpec } from '../http/route-spec.js';
import type { StreamLimits } from '../http/stream-limits.js';
import { ErrorRecord } from '../schemas.js';

const EventsQueryString = Type.Object(
  {
    after: Type.Optional(
      Type.String({
        description:
          'Start after this event id: every change after it, in order, then live. `0` replays every change kept, from the oldest one kept. ' +
          'A Last-Event-ID header (sent by a browser reconnecting) wins over it. Without either the stream starts at the newest change.',
      }),
    ),
    access_token: Type.Optional(
      Type.String({
        description:
          'The bearer token, for clients that cannot send an Authorization header (a browser EventSource); never with one. ' +
          'Redacted from logs, but a URL travels further than a header (proxies, browser history): prefer the header.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** What the single response of the stream carries in the document: the events, as text/event-stream describes them. */
const EVENT_STREAM_DESCRIPTION =
  'A text/event-stream. Each change is one event whose `id:` is its sequence number (decimal, strictly increasing in commit order):\n\n' +
  '```\nevent: plant.created\nid: 42\ndata: {"id":9007199254740993,"name":"Monstera","tag":"aroid"}\n\n' +
  'event: plant.deleted\nid: 43\ndata: {"id":9007199254740993}\n```\n\n' +
  '`data` of plant.created is a StoredPlant (the id an exact JSON integer; `tag` only when the plant has one), of plant.deleted `{"id": <int64>}`. ' +
  'When a change the cursor needs is no longer kept (or the cursor is past the newest change), the first event is `event: reset` with the newest sequence as its `id:` and ' +
  '`data: {"message": "..."}`: list the store again, then go on. When the token is revoked or expires, the last event is ' +
  '`event: token-refused` whose `data` is the Error record a new request would get. The stream starts with `retry: 2000` and sends a comment line (`: keep-alive`) every FEED_HEARTBEAT_MS.';

/**
 * `GET /plants/events`: the change feed as Server-Sent Events (src/http/event-stream.ts). Authentication, the
 * scope, the cursor, Accept and the stream limits are all checked before the answer begins, so each refusal is an
 * Error record; after that the answer is the stream.
 */
export function eventRoutes(
  streams: EventStreams,
  limits: StreamLimits,
  watchToken: (request: FastifyRequest, onRefused: (error: Error) => void) => TokenWatch,
): RouteSpec[] {
  return [
    typedRoute({
      method: 'GET',
      url: '/plants/events',
      operationId: 'watchPlantChanges',
      summary: 'Watch every create and delete, as Server-Sent Events, resumable exactly',
      description:
        'Streams every change to the store (text/event-stream): `plant.created` and `plant.deleted` events whose `id:` is the ' +
        "change's sequence number. A client that reconnects with `Last-Event-ID` (browsers do it by themselves) or `?after=N` " +
        'gets every change after N, in order, with no gap and no duplicate, then the live ones. Changes are kept for FEED_RETENTION ' +
        '(and at most FEED_RETENTION_COUNT of them); an older cursor gets one `reset` event. A client that does not read is ' +
        'disconnected once FEED_STREAM_BUFFER_BYTES wait for it, and resumes from its last id. The token may come as ' +
        '`access_token` in the query, for browsers.',
      scope: 'plants:read',
      queryToken: true,
      schema: {
        querystring: EventsQueryString,
        response: { 200: Type.String({ description: EVENT_STREAM_DESCRIPTION }), 400: ErrorRecord, 401: ErrorRecord, 403: ErrorRecord, 406: ErrorRecord, 429: ErrorRecord, 503: ErrorRecord },
      },
      responseMediaTypes: { 200: EVENT_STREAM },
      handler: async (request, reply) => {
        if (!acceptsEventStream(request.headers.accept)) throw new NotAcceptableError(`this operation answers ${EVENT_STREAM} only`);
        const lastEventId = request.headers['last-event-id'];
        const requested =
          typeof lastEventId === 'string' && lastEventId !== ''
            ? parseCursor(lastEventId, 'Last-Event-ID')
            : request.query.after === undefined
              ? undefined
              : parseCursor(request.query.after, 'querystring.after');
        const headers = () => reply.getHeaders() as Record<string, string | number | string[]>;
        // Pipelined behind another answer: nothing is taken (a slot, the starting point) before this one's turn.
        const turn = await streams.turn(request.raw, reply.raw);
        if (turn !== 'now') {
          reply.hijack();
          // Behind a stream it is never answered (the stream ends with the connection): it waits for that close
          // without counting as a pending request.
          if (turn === 'behind a stream') stopCountingAsPending(reply.raw);
          return reply;
        }
        // The head alone: no stream, no slot.
        if (request.method === 'HEAD') {
          reply.hijack();
          streams.answerHead(reply.raw, headers());
          return reply;
        }
        // Shutting down: a stream that ends at once, which an EventSource retries (a 503 would end it for good).
        if (streams.closing) {
          reply.hijack();
          streams.endAtOnce(reply.raw, headers());
          return reply;
        }
        const release = limits.open(request.tokenName, request.ip);
        try {
          const start = await streams.startingPoint(requested);
          reply.hijack();
          await streams.serve(reply.raw, headers(), start, (onRefused) => watchToken(request, onRefused));
        } finally {
          release();
        }
        return reply;
      },
    }),
  ];
}
