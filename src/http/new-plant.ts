import AjvCompiler from '@fastify/ajv-compiler';
import type { FastifySchemaValidationError } from 'fastify';
import type { Plant } from '../plant.js';
import { plantSchemas, type NewPlantBody, type SchemaLimits } from '../schemas.js';
import { describeValidationError } from './error-reply.js';
import { parseJsonBody, plantFromBody } from './json-body.js';

/**
 * The ajv options of every schema the app validates with. The contract forbids silently changing data: no coercion
 * ("5" is not an id), no stripping of unknown fields, no defaults filled in; the first error only.
 */
export const STRICT_AJV_OPTIONS = Object.freeze({ coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false });

type BodyValidator = ((body: unknown) => boolean) & { errors?: unknown };

/** Fastify's own validator compiler (its default, @fastify/ajv-compiler) with the app's options, as the app gets it. */
function compileBodyValidator(schema: object): BodyValidator {
  // Its types say the built compiler takes a schema; Fastify calls it with the route's definition, as here.
  const build = AjvCompiler()({}, { customOptions: { ...STRICT_AJV_OPTIONS } }) as (route: {
    schema: object;
    method: string;
    url: string;
    httpPart: string;
  }) => BodyValidator;
  return build({ schema, method: 'POST', url: '/plants', httpPart: 'body' });
}

/**
 * Reads one NewPlant text exactly as `POST /plants` reads a body: the same parser (parseJsonBody: UTF-8, duplicate
 * keys, lone surrogates, exact int64), the same schema compiled by the same compiler with the same options, the same
 * wording (describeValidationError), the same int64 range check (plantFromBody). Returns the plant, or throws a
 * BadRequestError whose message names the problem. A field is named as a single create names it, `body.name`,
 * wherever the text came from, so a bulk line's 400 is the very record a single create of it answers; `subject`
 * names the text as a whole ("line is not valid JSON", "plant is missing required property 'name'").
 * `plantstore import` validates each line with it.
 */
export function newPlantReader(limits: SchemaLimits, subject = 'plant'): (text: Buffer) => Plant {
  const validate = compileBodyValidator(plantSchemas(limits).NewPlant);
  return (text) => {
    const body = parseJsonBody(text, subject);
    if (!validate(body)) {
      const errors = (validate.errors ?? []) as FastifySchemaValidationError[];
      throw describeValidationError(errors, errors[0]?.instancePath ? 'body' : subject);
    }
    return plantFromBody(body as NewPlantBody);
  };
}
