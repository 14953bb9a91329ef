/**
 * The API's shapes as the client sees them, declared once as field tables from which the TypeScript types are
 * derived. A test compares these tables with the components of the server's OpenAPI document, so the client's types
 * cannot drift from what the server validates and answers.
 */

/** A field's JSON Schema type and format (int64: a bigint here), `?` when the field is optional. */
type FieldKind = 'string' | 'string?' | 'int64' | 'int32' | 'integer' | 'boolean';

export const FIELDS = {
  /** What a create answers: the plant without its id. */
  Plant: { name: 'string', tag: 'string?' },
  /** What a create takes. */
  NewPlant: { id: 'int64', name: 'string', tag: 'string?' },
  /** A plant as get, list and the change feed answer it. */
  StoredPlant: { id: 'int64', name: 'string', tag: 'string?' },
  /** The body of every error answer. */
  Error: { error: 'int32', message: 'string' },
} as const satisfies Record<string, Record<string, FieldKind>>;

type Value<K> = K extends 'string' | 'string?' ? string : K extends 'int64' ? bigint : K extends 'boolean' ? boolean : number;
type Shape<T extends Record<string, FieldKind>> = {
  readonly [K in keyof T as T[K] extends `${string}?` ? never : K]: Value<T[K]>;
} & {
  readonly [K in keyof T as T[K] extends `${string}?` ? K : never]?: Value<T[K]>;
};
type Flat<T> = { [K in keyof T]: T[K] };

/** A plant as a create answers it: `name`, and `tag` when it has one. */
export type Plant = Flat<Shape<typeof FIELDS.Plant>>;
/** A stored plant: its exact id, `name`, and `tag` when it has one. */
export type StoredPlant = Flat<Shape<typeof FIELDS.StoredPlant>>;
/** A plant to create; its id a bigint, or a number while it is a safe integer. */
export type NewPlant = Flat<Omit<Shape<typeof FIELDS.NewPlant>, 'id'> & { readonly id: bigint | number }>;
/** The server's Error record. */
export type ErrorRecord = Flat<Shape<typeof FIELDS.Error>>;

/** The outcome of one line of createMany, with the id of the plant it sent. */
export type BulkResult =
  | { readonly line: number; readonly id: bigint; readonly status: 200; readonly created: boolean; readonly plant: Plant }
  | { readonly line: number; readonly id: bigint | undefined; readonly status: number; readonly error: number; readonly message: string };

/** One result line of a bulk create as the server writes it (createLines yields these: it knows no ids). */
export type BulkLine =
  | { readonly line: number; readonly status: 200; readonly created: boolean; readonly plant: Plant }
  | { readonly line: number; readonly status: number; readonly error: number; readonly message: string };

/** One change of the feed. `sequence` is the change's position in the feed, the cursor watch resumes from. */
export type Change =
  | { readonly type: 'plant.created'; readonly sequence: bigint; readonly plant: StoredPlant }
  | { readonly type: 'plant.deleted'; readonly sequence: bigint; readonly id: bigint }
  /** Changes after the cursor are no longer kept: list the store again, then go on from here. */
  | { readonly type: 'reset'; readonly sequence: bigint; readonly message: string };

/** A verified webhook: the Standard Webhooks id (the same on every retry: dedupe on it), its timestamp, the plant. */
export interface WebhookEvent {
  readonly type: 'newPlant';
  readonly webhookId: string;
  readonly timestamp: number;
  readonly plant: StoredPlant;
}
