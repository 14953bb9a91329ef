import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { plantFromBody } from '../http/json-body.js';
import { BulkCreateAnswer, LineStreamBody, NDJSON, type BulkCreateOptions } from '../http/ndjson.js';
import { parseInt64Parameter, parseLimitParameter } from '../http/params.js';
import { typedRoute, type RouteSpec } from '../http/route-spec.js';
import type { PlantService } from '../plants/service.js';
import {
  ErrorRecord,
  type ErrorBody,
  type PlantBody,
  type PlantSchemas,
  type StoredPlantBody,
} from '../schemas.js';
import type { Plant } from '../plant.js';

/** The API's Plant: `tag` only when the plant has one, and never the id. */
function toPlantBody(plant: Plant): PlantBody {
  return plant.tag === null ? { name: plant.name } : { name: plant.name, tag: plant.tag };
}

/** A plant as the read operations answer it; the bigint id is written with all its digits by the serializer. */
function toStoredPlantBody(plant: Plant): StoredPlantBody {
  return plant.tag === null ? { id: plant.id, name: plant.name } : { id: plant.id, name: plant.name, tag: plant.tag };
}

/**
 * RFC 8288 link to the next keyset page. It is a URI reference relative to this server (resolved against the
 * request URI), so it stays right behind proxies that rewrite scheme or host; the tag is percent-encoded.
 */
function nextPageLink(limit: number, after: bigint, tag: string | undefined): string {
  const tagPart = tag === undefined ? '' : `&tag=${encodeURIComponent(tag)}`;
  return `</plants?limit=${limit}&after=${after}${tagPart}>; rel="next"`;
}

/** How a streamed bulk create reads and answers its lines (src/http/ndjson.ts); the app builds it from the configuration. */
export interface BulkCreateSettings extends Pick<BulkCreateOptions, 'maxLineBytes' | 'maxLines' | 'window' | 'idleTimeoutMs' | 'readPlant' | 'stopping'> {
  /** The Error record the single create would answer for this error. */
  errorRecord(error: unknown, request: FastifyRequest): ErrorBody;
  /** Waits for the request's token to earn one more create (rate limiting), or undefined at once when it may go. */
  admitLine?(request: FastifyRequest): Promise<void> | undefined;
  /** Watches the request's token for as long as its stream lasts (BulkCreateOptions.watchToken). */
  readonly watchToken?: (request: FastifyRequest, onRefused: (error: Error) => void) => { check(): Error | undefined; stop(): void };
  /** Called as a stream begins; the function it returns, once its answer has ended or was cut off. */
  readonly whileStreaming?: () => () => void;
}

/**
 * How long a connection whose request was left unread after its answer may linger, its rest read and dropped, before
 * it is closed: time for a client that reads only once it has sent everything to send a large rest (nginx's
 * lingering_time is 30 s; one connection's slot is what this holds).
 */
const UNREAD_LINGER_MS = 5000;
/** The same while the server shuts down, which waits for every connection: shorter, so that the shutdown is. */
const SHUTDOWN_LINGER_MS = 1000;

/**
 * Closes the connection of a request answered before it was read to its end, without resetting it (nginx's lingering
 * close): the rest is read and dropped, and the connection ended once it has all come, or destroyed after `lingerMs`.
 * Closed with bytes unread, the connection would be reset, and a client still writing would lose the answer with its
 * write; ended before the rest has come, a client whose socket ends its own sending when the server's end arrives
 * (Node's) fails its next write. Called at the answer's 'prefinish', before Node's own 'finish' handling, which ends
 * and destroys the connection of an answer saying `Connection: close` (the socket's destroySoon()): that is made a
 * no-op for this socket. The rest is read, not resumed: the body's reader left the request in paused mode
 * ('readable'), where resume() does nothing.
 */
function closeAfterTheRest(rest: IncomingMessage, lingerMs: number): void {
  const socket = rest.socket as Socket & { destroySoon?: () => void };
  // An injected request (tests) has a socket that is no net.Socket: nothing to close.
  if (typeof socket.destroySoon !== 'function') return;
  // Node's 'finish' calls destroySoon() for an answer saying `Connection: close`; the lingering has begun by then.
  socket.destroySoon = () => undefined;
  const drop = () => {
    while (rest.read() !== null);
  };
  rest.on('readable', drop);
  rest.once('end', () => socket.end());
  drop();
  setTimeout(() => socket.destroy(), lingerMs).unref();
}

/**
 * A streamed bulk create: one result line per request line, written as lines commit. When the request was not read
 * to its end (too many lines, a timeout) the connection is closed after the answer: its remaining bytes are no request.
 */
function answerLineStream(body: LineStreamBody, request: FastifyRequest, reply: FastifyReply, plants: PlantService, bulk: BulkCreateSettings) {
  // The stream waits for room in the write queue instead of having lines refused, in turn with other streams.
  const lane = plants.openLane();
  const { watchToken } = bulk;
  const answer = new BulkCreateAnswer(body.source, {
    maxLineBytes: bulk.maxLineBytes,
    maxLines: bulk.maxLines,
    window: bulk.window,
    idleTimeoutMs: bulk.idleTimeoutMs,
    readPlant: bulk.readPlant,
    lane,
    ...(bulk.stopping ? { stopping: bulk.stopping } : {}),
    create: (plant) => plants.createWithOutcome(plant, lane),
    plantBody: toPlantBody,
    errorRecord: (error) => bulk.errorRecord(error, request),
    ...(bulk.admitLine ? { admitLine: () => bulk.admitLine?.(request) } : {}),
    ...(watchToken ? { watchToken: (onRefused: (error: Error) => void) => watchToken(request, onRefused) } : {}),
  });
  const release = bulk.whileStreaming?.();
  if (release) answer.once('close', release);
  reply.raw.once('prefinish', () => {
    if (answer.unreadRequest && !request.raw.complete) closeAfterTheRest(request.raw, bulk.stopping?.aborted ? SHUTDOWN_LINGER_MS : UNREAD_LINGER_MS);
  });
  return reply.code(200).type(NDJSON).send(answer);
}

export function plantRoutes(schemas: PlantSchemas, plants: PlantService, bulk: BulkCreateSettings): RouteSpec[] {
  return [
    typedRoute({
      method: 'POST',
      url: '/plants',
      operationId: 'addPlant',
      summary: 'Create a plant',
      description:
        'Stores a new plant durably (committed and fsync\'d before the answer) and answers the Plant, without its id. ' +
        'Sending an id that is already stored with the same name and tag is an idempotent replay and answers 200; ' +
        'with a different name or tag it answers 409.\n\n' +
        'Sent as `application/x-ndjson`, the body is a stream of NewPlant lines (a streamed bulk create): each line is read ' +
        'and stored exactly as a single create\'s body, and the answer is `200` `application/x-ndjson` with one `BulkCreateResult` ' +
        'line per non-blank request line, in request order, each written once its plant is committed and fsync\'d (or refused). ' +
        'A bad line never stops the lines after it. Blank lines are skipped (they keep their number). At most `BULK_MAX_LINES` ' +
        'lines are read; the next one is answered by a final 413 line, a request that sends nothing for `REQUEST_TIMEOUT_MS` ' +
        'by a final 408 line, and a stream the server stops reading because it shuts down by a final 503 line naming the first ' +
        'line not read; the connection then closes. When the write queue is full the stream waits (the server stops reading it) ' +
        'rather than refusing lines.',
      scope: 'plants:create',
      lineStream: { mediaType: NDJSON, line: schemas.NewPlant, result: schemas.BulkCreateResult },
      schema: {
        body: schemas.NewPlant,
        response: {
          200: schemas.Plant,
          400: ErrorRecord,
          401: ErrorRecord,
          403: ErrorRecord,
          409: ErrorRecord,
          413: ErrorRecord,
          415: ErrorRecord,
          429: ErrorRecord,
          503: ErrorRecord,
        },
      },
      // A single create counts against its client's share of the write queue: its address (behind a trusted proxy, the
      // client the proxy names).
      handler: async (request, reply) =>
        request.body instanceof LineStreamBody
          ? answerLineStream(request.body, request, reply, plants, bulk)
          : toPlantBody(await plants.create(plantFromBody(request.body), request.ip)),
    }),
    typedRoute({
      method: 'GET',
      url: '/plants',
      operationId: 'listPlants',
      summary: 'List plants, by id, one keyset page at a time',
      description:
        'Answers a JSON array of stored plants in ascending id order, at most `limit` of them (default 20, at most 1000), ' +
        'only those whose tag is exactly `tag` when given. Paging is by keyset, not offset: while more plants remain the ' +
        'response carries `Link: </plants?limit=N&after=ID[&tag=T]>; rel="next"` (RFC 8288, a URI reference relative to ' +
        'this server, tag percent-encoded), whose `after` is the last id of this page; the last page has no Link header. ' +
        'A plant stored for the whole walk is answered exactly once, whatever is created or deleted between pages.',
      scope: 'plants:read',
      schema: {
        querystring: schemas.PlantListQueryString,
        response: { 200: schemas.PlantList, 400: ErrorRecord, 401: ErrorRecord, 403: ErrorRecord, 429: ErrorRecord, 503: ErrorRecord },
      },
      responseHeaders: {
        200: {
          Link: {
            description: 'RFC 8288 link to the next keyset page, `</plants?limit=N&after=ID[&tag=T]>; rel="next"`, while more plants remain',
            required: false,
            schema: { type: 'string' },
          },
        },
      },
      handler: async (request, reply) => {
        const { query } = request;
        const limit = parseLimitParameter(query.limit, 'querystring.limit');
        const after = query.after === undefined ? undefined : parseInt64Parameter(query.after, 'querystring.after');
        const page = await plants.list({
          limit,
          ...(after === undefined ? {} : { after }),
          ...(query.tag === undefined ? {} : { tag: query.tag }),
        });
        if (page.nextAfter !== undefined) reply.header('link', nextPageLink(limit, page.nextAfter, query.tag));
        return page.plants.map(toStoredPlantBody);
      },
    }),
    typedRoute({
      method: 'GET',
      url: '/plants/:id',
      operationId: 'getPlant',
      summary: 'Read one plant',
      description: 'Answers the stored plant with its exact id (a JSON integer with all its digits), or 404.',
      scope: 'plants:read',
      schema: {
        params: schemas.PlantIdParams,
        response: { 200: schemas.StoredPlant, 400: ErrorRecord, 401: ErrorRecord, 403: ErrorRecord, 404: ErrorRecord, 429: ErrorRecord, 503: ErrorRecord },
      },
      handler: async (request) => toStoredPlantBody(await plants.get(parseInt64Parameter(request.params.id, 'params.id'))),
    }),
    typedRoute({
      method: 'DELETE',
      url: '/plants/:id',
      operationId: 'deletePlant',
      summary: 'Delete one plant',
      description: 'Deletes the plant durably and answers 204 with no body, or 404 when no plant has that id. The id can then be created again.',
      scope: 'plants:delete',
      schema: {
        params: schemas.PlantIdParams,
        response: { 204: null, 400: ErrorRecord, 401: ErrorRecord, 403: ErrorRecord, 404: ErrorRecord, 429: ErrorRecord, 503: ErrorRecord },
      },
      handler: async (request, reply) => {
        await plants.delete(parseInt64Parameter(request.params.id, 'params.id'));
        return reply.code(204).send();
      },
    }),
  ];
}
