import { Type } from 'typebox';
import type { Readiness } from '../health/readiness.js';
import type { RouteSpec } from '../http/route-spec.js';
import { ErrorRecord } from '../schemas.js';

const Status = Type.Object({ status: Type.String() }, { additionalProperties: false });

export function systemRoutes(readiness: Readiness, openApiDocument: () => unknown): RouteSpec[] {
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
        await readiness.check();
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
