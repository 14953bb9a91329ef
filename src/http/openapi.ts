import type { TSchema } from 'typebox';
import { SCOPES, SCOPE_ACTIONS } from '../auth/scopes.js';
import { ErrorRecord } from '../schemas.js';
import { ERROR_DESCRIPTIONS, EVERY_RESPONSE_HEADERS, STATUS_HEADERS, openApiPath, statusesBeforeRouting, type RouteSpec } from './route-spec.js';

const SUCCESS_DESCRIPTIONS: Readonly<Record<number, string>> = {
  200: 'Success',
  204: 'Success, no content',
};

/** Documentation outside the document that it links to: OpenAPI's `externalDocs`. */
interface ExternalDocs {
  readonly description: string;
  /** A URI reference; relative ones resolve against the document's own URL (OpenAPI 3.1, "Relative References"). */
  readonly url: string;
}

/**
 * The OpenAPI 3.1 document, generated from the same route specs and schema objects the server validates and
 * serializes with. Schemas named in `components` are referenced by identity.
 */
export interface DocumentExtras {
  /** Documentation outside the document that it links to. */
  readonly externalDocs?: ExternalDocs;
  /** OpenAPI 3.1 `webhooks`: requests this service sends rather than answers. */
  readonly webhooks?: Readonly<Record<string, unknown>>;
}

export function buildOpenApi(
  routes: readonly RouteSpec[],
  components: Readonly<Record<string, TSchema>>,
  { externalDocs, webhooks = {} }: DocumentExtras = {},
): object {
  const names = new Map<unknown, string>(Object.entries(components).map(([name, schema]) => [schema, name]));
  const ref = (schema: TSchema): unknown => {
    const name = names.get(schema);
    return name ? { $ref: `#/components/schemas/${name}` } : plain(schema);
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = openApiPath(route.url);
    const responses: Record<string, unknown> = {};
    const answers: Record<number, TSchema | null> = { ...route.schema.response };
    for (const status of statusesBeforeRouting(route)) answers[status] ??= ErrorRecord;
    // Integer-like keys enumerate in ascending order, so the document lists each operation's statuses sorted.
    for (const [status, schema] of Object.entries(answers)) {
      const code = Number(status);
      const description = SUCCESS_DESCRIPTIONS[code] ?? ERROR_DESCRIPTIONS[code] ?? String(code);
      const headers = { ...EVERY_RESPONSE_HEADERS, ...STATUS_HEADERS[code], ...route.responseHeaders?.[code] };
      const mediaType = route.responseMediaTypes?.[code];
      // A line-stream answer is documented by the schema of each of its lines (OpenAPI 3.1 has no item schema).
      const streamed = code === 200 && route.lineStream ? { [route.lineStream.mediaType]: { schema: ref(route.lineStream.result) } } : {};
      responses[status] = {
        description,
        headers,
        ...(mediaType
          ? { content: { [mediaType]: { schema: { type: 'string', ...describedAs(schema) } } } }
          : schema
            ? { content: { 'application/json': { schema: ref(schema) }, ...streamed } }
            : code === 204
              ? {}
              : { content: { 'application/json': {} } }),
      };
    }
    const parameters = [
      ...parametersOf(route.schema.params, 'path'),
      ...parametersOf(route.schema.querystring, 'query'),
    ];
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[route.method.toLowerCase()] = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      // OpenAPI 3.1 lets an http scheme's requirement list role names: here the one scope the operation needs.
      security: route.scope ? [{ bearerAuth: [route.scope] }] : [],
      ...(parameters.length ? { parameters } : {}),
      ...(route.schema.body
        ? {
            requestBody: {
              required: true,
              content: {
                'application/json': { schema: ref(route.schema.body) },
                // Each line of a line-stream body is one of these.
                ...(route.lineStream ? { [route.lineStream.mediaType]: { schema: ref(route.lineStream.line) } } : {}),
              },
            },
          }
        : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Plant Store',
      version: '1.0.0',
      license: { name: 'MIT', identifier: 'MIT' },
      description:
        'Every non-2xx response is an Error record whose `error` is the HTTP status code. Ids are int64 and are kept exact over the whole range.',
    },
    // Relative: the service answers at whatever address it is deployed, so the document names no host (OpenAPI 3.1
    // resolves a relative server URL against where the document was fetched from).
    servers: [{ url: '/' }],
    ...(externalDocs ? { externalDocs: { ...externalDocs } } : {}),
    paths,
    ...(Object.keys(webhooks).length ? { webhooks } : {}),
    components: {
      schemas: Object.fromEntries(Object.entries(components).map(([name, schema]) => [name, plain(schema)])),
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'A token made with `plantstore token create`. Each operation names the one scope it needs ' +
            `(${SCOPES.map((scope) => `\`${scope}\`: ${SCOPE_ACTIONS[scope]}`).join('; ')}): a valid token without it is ` +
            'answered 403 with `WWW-Authenticate: Bearer error="insufficient_scope"`, and an expired token 401 with ' +
            '`error="invalid_token"`.',
        },
      },
    },
    security: [{ bearerAuth: [] }],
  };
}

function plain(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema));
}

function parametersOf(schema: TSchema | undefined, where: 'path' | 'query'): object[] {
  if (!schema) return [];
  const object = plain(schema) as { properties?: Record<string, { description?: string }>; required?: string[] };
  return Object.entries(object.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (object.required ?? []).includes(name),
    ...(property.description ? { description: property.description } : {}),
    schema: property,
  }));
}

const STANDARD_WEBHOOKS = 'https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md';

/**
 * The Plant Store's one event, as OpenAPI 3.1 and the original Plant Store describe it: `newPlant`, a POST of the
 * NewPlant that was created, to each subscriber's URL, with the Standard Webhooks headers.
 */
export function newPlantWebhook(): Record<string, unknown> {
  const header = (name: string, description: string, example: string) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
    example,
  });
  return {
    newPlant: {
      post: {
        operationId: 'newPlant',
        summary: 'Information about a new plant added to the store',
        description:
          'Sent to every active subscription (managed with `plantstore webhook`) once per plant created, at least once: a retry ' +
          'carries the same `webhook-id`, so receivers use it to drop duplicates. Ordering is not guaranteed. Any 2xx ' +
          'acknowledges; anything else, a timeout or a connection error is retried with backoff; 410 Gone disables the ' +
          `subscription. Signed as Standard Webhooks specify (${STANDARD_WEBHOOKS}).`,
        security: [],
        parameters: [
          header('webhook-id', "The event's id, the same on every retry: the receiver's idempotency key", 'msg_5f0c3a9e1b7d_42'),
          header('webhook-timestamp', 'When this attempt was made, in Unix seconds', '1767225600'),
          header(
            'webhook-signature',
            '`v1,` + base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}` keyed with the base64 part of the `whsec_` secret; ' +
              'space-separated when a rotated secret still signs beside the new one',
            'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
          ),
        ],
        requestBody: {
          description: 'The plant as it was created: id exact over the whole int64 range, name, and tag when one was given',
          required: true,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPlant' } } },
        },
        responses: {
          '200': { description: 'Return a 2xx status to indicate that the data was received successfully' },
          '410': { description: 'The receiver is gone for good: the subscription is disabled at once' },
        },
      },
    },
  };
}

/** A schema's description, for a response documented as a plain string of another media type. */
function describedAs(schema: TSchema | null): { description?: string } {
  const description = (schema as { description?: unknown } | null)?.description;
  return typeof description === 'string' ? { description } : {};
}
