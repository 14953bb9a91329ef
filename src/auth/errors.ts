import { SCOPE_ACTIONS, type Scope } from './scopes.js';

/**
 * Why a token was refused, in authentication's own words; the edge (src/http/error-reply.ts) decides what a client
 * is told: 401 for the first two, 403 for the last.
 */

/** The token is not one of the stored tokens: unknown, or revoked. */
export class InvalidTokenError extends Error {
  constructor() {
    super('invalid or revoked token');
    this.name = 'InvalidTokenError';
  }
}

/** The token is stored, but its expiry has passed. */
export class ExpiredTokenError extends Error {
  constructor() {
    super('the token has expired');
    this.name = 'ExpiredTokenError';
  }
}

/** The token is valid, but does not hold the scope the operation needs. */
export class MissingScopeError extends Error {
  constructor(readonly scope: Scope) {
    super(`this token may not ${SCOPE_ACTIONS[scope]}: it lacks the ${scope} scope`);
    this.name = 'MissingScopeError';
  }
}
