import { SCOPE_ACTIONS, type Scope } from './scopes.js';

/**
 * Why a token was refused, in authentication's own words; the edge (src/http/error-reply.ts) decides what a client
 * is told: 401 for the first two, 403 for the last.
 */

/**
 * A refusal of the client's token, made with no stack: it is the client's doing, a stack says nothing about it, and
 * capturing one costs more than deciding the refusal (a client retrying with a bad token makes one per request).
 */
class RefusedTokenError extends Error {
  constructor(message: string) {
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = stackTraceLimit;
  }
}

/** The token is not one of the stored tokens: unknown, or revoked. */
export class InvalidTokenError extends RefusedTokenError {
  constructor() {
    super('invalid or revoked token');
    this.name = 'InvalidTokenError';
  }
}

/** The token is stored, but its expiry has passed. */
export class ExpiredTokenError extends RefusedTokenError {
  constructor() {
    super('the token has expired');
    this.name = 'ExpiredTokenError';
  }
}

/** The token is valid, but does not hold the scope the operation needs. */
export class MissingScopeError extends RefusedTokenError {
  constructor(readonly scope: Scope) {
    super(`this token may not ${SCOPE_ACTIONS[scope]}: it lacks the ${scope} scope`);
    this.name = 'MissingScopeError';
  }
}
