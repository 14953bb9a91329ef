import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';

/** Every non-2xx answer is exactly an Error record, `{error, message}`, whose `error` is the status. */
export function assertErrorRecord(response: LightMyRequestResponse, status: number, message?: RegExp): void {
  assert.equal(response.statusCode, status, response.body);
  assert.match(String(response.headers['content-type']), /^application\/json/);
  const body = response.json() as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message']);
  assert.equal(body.error, status);
  assert.equal(typeof body.message, 'string');
  assert.ok((body.message as string).length > 0);
  if (message) assert.match(body.message as string, message);
}
