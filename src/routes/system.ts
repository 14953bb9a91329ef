import { Type } from 'typebox';
import type { RouteSpec } from '../http/route-spec.js';
import { ErrorRecord } from '../schemas.js';
import type { Store } from '../storage/store.js';

const Status = Type.Object({ status: Type.String() }, { additionalProperties: false });

export function systemRoutes(store: Store, openApiDocument: () => unknown): RouteSpec[] {
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
      summary: 'Readiness: storage answers',
      authenticated: false,
      schema: { response: { 200: Status, 503: ErrorRecord } },
      handler: async () => {
        await store.ping();
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
