/**
 * The client's types against the server's OpenAPI document: the field tables its types are derived from
 * (src/client/types.ts) name exactly the properties, required ones and JSON types of the document's components, and
 * the bulk create's result lines have the properties the client's BulkLine declares. A change to either side alone fails.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { FIELDS, type BulkLine } from '../../src/client/index.js';
import { useTestApp } from '../helpers/app.js';
import { sqliteDatabase } from '../helpers/databases.js';

interface Schema {
  type?: string;
  format?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  anyOf?: Schema[];
  $ref?: string;
}

const KIND: Record<string, { type: string; format?: string }> = {
  string: { type: 'string' },
  'string?': { type: 'string' },
  int64: { type: 'integer', format: 'int64' },
  int32: { type: 'integer', format: 'int32' },
  integer: { type: 'integer' },
  boolean: { type: 'boolean' },
};

// Each object's keys are checked by the compiler against the client's type: exactly these, no more, no fewer.
const BULK_CREATED: Record<keyof Extract<BulkLine, { created: boolean }>, true> = { line: true, status: true, created: true, plant: true };
const BULK_REFUSED: Record<keyof Extract<BulkLine, { message: string }>, true> = { line: true, status: true, error: true, message: true };

describe("the client's types and /openapi.json", () => {
  const t = useTestApp(sqliteDatabase);
  let schemas: Record<string, Schema>;
  before(async () => {
    const response = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    schemas = (response.json() as { components: { schemas: Record<string, Schema> } }).components.schemas;
  });

  for (const [name, fields] of Object.entries(FIELDS)) {
    it(`${name}: the same properties, required ones and types`, () => {
      const schema = schemas[name];
      assert.ok(schema, `components.schemas.${name} exists`);
      assert.deepEqual(Object.keys(schema.properties ?? {}).sort(), Object.keys(fields).sort(), 'properties');
      const required = Object.entries(fields as Record<string, string>).filter(([, kind]) => !kind.endsWith('?')).map(([field]) => field);
      assert.deepEqual([...(schema.required ?? [])].sort(), required.sort(), 'required');
      for (const [field, kind] of Object.entries(fields as Record<string, string>)) {
        const property = schema.properties?.[field] as Schema;
        const expected = KIND[kind] as { type: string; format?: string };
        assert.equal(property.type, expected.type, `${name}.${field} type`);
        if (expected.format) assert.equal(property.format, expected.format, `${name}.${field} format`);
      }
    });
  }

  it("BulkCreateResult: each variant's properties are those of the client's BulkLine", () => {
    const variants = schemas.BulkCreateResult?.anyOf ?? [];
    assert.equal(variants.length, 2);
    const keys = variants.map((variant) => Object.keys(variant.properties ?? {}).sort());
    assert.deepEqual(keys, [Object.keys(BULK_CREATED).sort(), Object.keys(BULK_REFUSED).sort()]);
    assert.deepEqual(Object.keys(variants[0]?.properties?.plant?.properties ?? {}).sort(), Object.keys(FIELDS.Plant).sort(), "a created line's plant is a Plant");
  });
});
