import type { FastifyRequest } from 'fastify';
import type { RouteSpec } from '../http/route-spec.js';
import type { PlantService } from '../plants/service.js';
import { ErrorRecord, type NewPlantBody, type PlantSchemas } from '../schemas.js';

export function plantRoutes(schemas: PlantSchemas, plants: PlantService): RouteSpec[] {
  return [
    {
      method: 'POST',
      url: '/plants',
      operationId: 'addPlant',
      summary: 'Create a plant',
      description:
        'Stores a new plant durably (committed and fsync\'d before the answer) and answers the Plant, without its id. ' +
        'Sending an id that is already stored with the same name and tag is an idempotent replay and answers 200; ' +
        'with a different name or tag it answers 409.',
      authenticated: true,
      schema: {
        body: schemas.NewPlant,
        response: {
          200: schemas.Plant,
          400: ErrorRecord,
          401: ErrorRecord,
          409: ErrorRecord,
          413: ErrorRecord,
          415: ErrorRecord,
          429: ErrorRecord,
          503: ErrorRecord,
        },
      },
      handler: (request: FastifyRequest) => plants.create(request.body as NewPlantBody),
    },
  ];
}
