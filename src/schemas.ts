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
export const NO_NUL = '^[^\\u0000]*$';

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

  /** A plant as the read operations answer it: the exact int64 id (a JSON integer, all digits), name, and tag when it has one. */
  const StoredPlant = Type.Object(
    {
      id: Type.Integer({ format: 'int64', description: 'Identification number of the plant, exact over the whole int64 range' }),
      name,
      tag: Type.Optional(tag),
    },
    { additionalProperties: false },
  );

  const PlantList = Type.Array(StoredPlant, {
    description:
      'Plants in ascending id order. When more remain, the response carries `Link: </plants?limit=N&after=ID[&tag=T]>; rel="next"` ' +
      '(RFC 8288; a URI reference relative to this server); the last page has no Link header.',
  });

  const PlantIdParams = Type.Object(
    {
      id: Type.String({
        description:
          'The plant id: an integer from -9223372036854775808 to 9223372036854775807 in canonical decimal ' +
          '(optional minus sign, no plus sign, no leading zeros, no -0), e.g. 9223372036854775807',
      }),
    },
    { additionalProperties: false },
  );

  const PlantListQueryString = Type.Object(
    {
      limit: Type.Optional(
        Type.String({
          description: `How many plants to answer at most: an integer from 1 to ${MAX_PAGE_LIMIT} in canonical decimal; default ${DEFAULT_PAGE_LIMIT}`,
        }),
      ),
      after: Type.Optional(
        Type.String({
          description:
            'Keyset cursor: answer only plants whose id is greater than this int64 (canonical decimal). ' +
            'Clients normally follow the Link rel="next" header rather than building it.',
        }),
      ),
      tag: Type.Optional(
        Type.String({
          maxLength: limits.tagLength,
          pattern: NO_NUL,
          description: 'Answer only plants whose tag is exactly this (case-sensitive; an empty value matches the empty tag)',
        }),
      ),
    },
    { additionalProperties: false },
  );

  /**
   * One line of the answer to a streamed bulk create (`POST /plants` as application/x-ndjson): the outcome of request
   * line `line`, with the status and body the single create would have answered for it.
   */
  const lineNumber = Type.Integer({ minimum: 1, description: 'The request line this result answers, numbered from 1 (blank lines count, and get no result)' });
  const BulkCreateResult = Type.Union(
    [
      Type.Object(
        {
          line: lineNumber,
          status: Type.Literal(200, { description: 'Stored now, or an identical replay of a stored plant' }),
          plant: Plant,
          created: Type.Boolean({ description: 'true when stored by this line, false for an identical replay of a stored plant' }),
        },
        { additionalProperties: false },
      ),
      Type.Object(
        {
          line: lineNumber,
          status: Type.Integer({ minimum: 400, maximum: 599, description: 'What the single create would have answered: 400, 409, 413, 503, ...' }),
          error: ErrorRecord.properties.error,
          message: ErrorRecord.properties.message,
        },
        { additionalProperties: false },
      ),
    ],
    { description: 'The outcome of one request line of a streamed bulk create, in request order' },
  );

  return { Plant, NewPlant, StoredPlant, PlantList, PlantIdParams, PlantListQueryString, BulkCreateResult };
}

/** GET /plants answers this many plants when the client names no limit, and at most MAX_PAGE_LIMIT. */
export const DEFAULT_PAGE_LIMIT = 20;
export const MAX_PAGE_LIMIT = 1000;

export const ErrorRecord = Type.Object(
  {
    error: Type.Integer({ format: 'int32', description: 'Numeric error value: the HTTP status code of the response' }),
    message: Type.String({ description: 'What went wrong, naming the field or rule' }),
  },
  { additionalProperties: false },
);

/** The body of every error answer: the interface's Error record. */
export type ErrorBody = Static<typeof ErrorRecord>;
export type PlantSchemas = ReturnType<typeof plantSchemas>;
/** A Plant as POST /plants answers it: name and tag, no id. */
export type PlantBody = Static<PlantSchemas['Plant']>;
/** A NewPlant as JSON decodes it; the exact id travels beside it (see http/json-body.ts). */
export type NewPlantBody = Static<PlantSchemas['NewPlant']>;
/** A stored plant as the read operations answer it; its id is a bigint, written exactly by the serializer. */
export type StoredPlantBody = Omit<Static<PlantSchemas['StoredPlant']>, 'id'> & { readonly id: bigint };
