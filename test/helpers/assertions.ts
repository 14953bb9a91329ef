import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { errorRecordProblem } from './process.js';

/** What an answer said; `message` is a whole message when a string, a pattern to match when a RegExp. */
function assertErrorBody(status: number, contentType: string | undefined, body: string, message: string | RegExp | undefined): void {
  assert.equal(errorRecordProblem(status, contentType, body), undefined);
  if (message === undefined) return;
  const actual = (JSON.parse(body) as { message: string }).message;
  if (typeof message === 'string') assert.equal(actual, message);
  else assert.match(actual, message);
}

/**
 * Every non-2xx answer is exactly an Error record, `{error, message}`, whose `error` is the status, with a JSON
 * content type (errorRecordProblem); with `message`, the record's message is that text (a string) or matches it.
 */
export function assertErrorRecord(response: LightMyRequestResponse, status: number, message?: string | RegExp): void {
  assert.equal(response.statusCode, status, response.body);
  assertErrorBody(status, response.headers['content-type'] as string | undefined, response.body, message);
}

/** The same, for an answer read off a socket (helpers/process.ts rawRequest, parseResponse). */
export function assertRawErrorRecord(
  response: { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: string },
  status: number,
  message?: string | RegExp,
): void {
  assert.equal(response.status, status, JSON.stringify(response));
  assertErrorBody(status, response.headers['content-type'], response.body, message);
}

/** The ids of a list answer or of JSON lines, read from the text so nothing is rounded through a double. */
export function idsOf(body: string): bigint[] {
  return [...body.matchAll(/"id":(-?\d+)/g)].map((match) => BigInt(match[1] as string));
}
