import { Type, type Static } from 'typebox';

/**
 * The JSON Schemas of the interface. Fastify validates and serializes with them, the TypeScript types are
 * derived from them and /openapi.json is generated from them: there is no second copy to drift.
 */

export interface SchemaLimits {
  readonly nameLength: number;
  readonly tagLength: number;
}

/** PostgreSQL text cannot hold NUL and SQLite would keep it: refuse it so both stores behave alike. */
const NO_NUL = '^[^\\u0000]*$';

export function plantSchemas(limits: SchemaLimits) {
  const name = Type.String({
    minLength: 1,
    maxLength: limits.nameLength,
    pattern: NO_NUL,
    description: 'The name of the plant',
  });
  const tag = Type.String({ maxLength: limits.tagLength, pattern: NO_NUL, description: 'Tag that specifies the type' });

  const Plant = Type.Object({ name, tag: Type.Optional(tag) }, { additionalProperties: false });

  const NewPlant = Type.Object(
    {
      id: Type.Integer({
        format: 'int64',
        description: 'Identification number of the plant: any integer from -9223372036854775808 to 9223372036854775807, kept exact',
      }),
      name,
      tag: Type.Optional(tag),
    },
    { additionalProperties: false },
  );

  return { Plant, NewPlant };
}

export const ErrorRecord = Type.Object(
  {
    error: Type.Integer({ format: 'int32', description: 'Numeric error value: the HTTP status code of the response' }),
    message: Type.String({ description: 'What went wrong, naming the field or rule' }),
  },
  { additionalProperties: false },
);

export type ErrorRecord = Static<typeof ErrorRecord>;
export type PlantSchemas = ReturnType<typeof plantSchemas>;
export type PlantBody = Static<PlantSchemas['Plant']>;
/** A NewPlant as JSON decodes it; the exact id travels beside it (see json-body.ts). */
export type NewPlantBody = Static<PlantSchemas['NewPlant']>;
