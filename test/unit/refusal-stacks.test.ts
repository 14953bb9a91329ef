/**
 * Refusals of the client's doing are made without a stack (src/http/errors.ts, src/auth/errors.ts): capturing one
 * costs a refused request more than deciding it. A 5xx keeps its stack, and the process's limit is left as it was.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ExpiredTokenError, InvalidTokenError, MissingScopeError } from '../../src/auth/errors.js';
import { NotFoundError, ServiceUnavailableError, TooManyRequestsError, UnauthorizedError } from '../../src/http/errors.js';

const FRAME = /\n\s+at /;

describe('refusals made without a stack', () => {
  it('4xx errors and token refusals carry no stack frames, and keep their name and message', () => {
    const limit = Error.stackTraceLimit;
    const refusals: Error[] = [new UnauthorizedError('no token'), new NotFoundError('no route'), new TooManyRequestsError(3, 'slow down'), new InvalidTokenError(), new ExpiredTokenError(), new MissingScopeError('plants:create')];
    assert.equal(Error.stackTraceLimit, limit);
    for (const error of refusals) {
      assert.doesNotMatch(error.stack ?? '', FRAME, error.name);
      assert.ok(error instanceof Error);
      assert.match(String(error.stack), new RegExp(`^${error.name}: `));
    }
    assert.equal(new UnauthorizedError('no token').status, 401);
    assert.equal(new InvalidTokenError().name, 'InvalidTokenError');
  });

  it('a 5xx keeps its stack', () => {
    assert.match(new ServiceUnavailableError('storage is down').stack ?? '', FRAME);
  });
});
