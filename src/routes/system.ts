import { Type } from 'typebox';
import { ServiceUnavailableError } from '../errors.js';
import type { RouteSpec } from '../http/route-spec.js';
import { ErrorRecord } from '../schemas.js';
import type { GroupCommitter } from '../storage/group-commit.js';
import type { Store } from '../storage/store.js';

const Status = Type.Object({ status: Type.String() }, { additionalProperties: false });

/**
 * A successful heartbeat answers every readiness probe for this long. /readyz needs no token and each heartbeat is
 * a durable commit, so however often it is polled, storage sees at most one heartbeat per interval; a failure is
 * never reused, so recovery shows at the next probe.
 */
export const READY_REUSE_MS = 250;

export function systemRoutes(store: Store, writes: GroupCommitter, openApiDocument: () => unknown): RouteSpec[] {
  let readyAt = -Infinity;
  let heartbeat: Promise<void> | undefined;
  const checkWritable = () =>
    (heartbeat ??= store
      .checkWritable()
      .then(() => {
        readyAt = performance.now();
      })
      .finally(() => {
        heartbeat = undefined;
      }));
  return [
    {
      method: 'GET',
      url: '/healthz',
      operationId: 'health',
      summary: 'Liveness: the process is up',
      authenticated: false,
      schema: { response: { 200: Status } },
      handler: async () => ({ status: 'ok' }),
    },
    {
      method: 'GET',
      url: '/readyz',
      operationId: 'ready',
      summary: 'Readiness: storage takes writes',
      description:
        'Answers 200 once a one-row heartbeat write has been committed durably. Answers 503 when that write fails ' +
        '(database down, disk full, file locked past 1 s, read-only, SQLite WAL not being checkpointed) or when storage refused the latest batch of creates, or part of it, ' +
        'within the last 5 s and none has committed since; it turns 200 again by itself once the cause goes away. A successful ' +
        'heartbeat answers every probe for 250 ms.',
      authenticated: false,
      schema: { response: { 200: Status, 503: ErrorRecord } },
      handler: async () => {
        if (writes.refusedByStorageRecently) throw new ServiceUnavailableError('storage is unavailable; retry shortly');
        if (performance.now() - readyAt >= READY_REUSE_MS) await checkWritable();
        return { status: 'ready' };
      },
    },
    {
      method: 'GET',
      url: '/openapi.json',
      operationId: 'openapi',
      summary: 'This OpenAPI 3.1 document',
      authenticated: false,
      schema: { response: { 200: null } },
      handler: async () => openApiDocument(),
    },
  ];
}
