import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { ExpiredTokenError, InvalidTokenError, MissingScopeError } from '../../auth/errors.js';
import type { Scope } from '../../auth/scopes.js';
import type { Services } from '../../services.js';
import type { Tracing } from '../../tracing/tracing.js';
import { readBearerToken, singleAuthorization } from '../bearer.js';
import { MalformedCredentialsError, TooManyRequestsError, UnauthorizedError } from '../errors.js';
import { AuthFailureThrottle } from '../rate-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Name of the token that authenticated this request; '' before authentication. */
    tokenName: string;
  }
  interface FastifyInstance {
    /**
     * The onRequest hook of a route that asks for a token holding `scope`: it sets request.tokenName, or refuses with
     * 401/403 (429 for an address that failed too often). One per route, made when the route is; none per request.
     */
    authenticateFor(scope: Scope, queryToken?: boolean): onRequestHookHandler;
  }
}

export interface AuthenticationOptions {
  readonly tokens: Services['tokens'];
  readonly metrics: Services['metrics'];
  readonly tracing: Tracing | undefined;
  /** AUTH_FAILURE_LIMIT: failed authentications a client address may make a minute, per instance; null for no limit. */
  readonly failureLimit: number | null;
  /** The threads serving HTTP (WORKERS): each throttles its share of the limit. */
  readonly threads: number;
  /** The clock the throttle's buckets refill by (AppOptions.now). */
  readonly now: (() => number) | undefined;
}

/**
 * The `access_token` query parameter of a route that takes one (RouteSpec.queryToken), when no Authorization header
 * was sent; undefined otherwise. Both at once is a malformed request (RFC 6750 §2: one method only).
 */
function tokenFromQuery(query: unknown, header: string | undefined): string | undefined {
  const value = (query as Record<string, unknown> | undefined)?.access_token;
  if (value === undefined) return undefined;
  if (header !== undefined) throw new MalformedCredentialsError('send the token in the Authorization header or the access_token parameter, not both');
  if (typeof value !== 'string' || value === '') throw new MalformedCredentialsError('access_token must be one non-empty token');
  return value;
}

/**
 * The token a request presents, from its headers (and its query, for a route that takes one): checked at onRequest,
 * and read again by a long request that watches its token for as long as it lasts (TokenAuthenticator.watch).
 */
export function presentedToken(request: FastifyRequest, queryToken = false): string {
  const header = singleAuthorization(request.raw.rawHeaders);
  return (queryToken ? tokenFromQuery(request.query, header) : undefined) ?? readBearerToken(header);
}

/** An onRequest hook's callback, and the span of an authentication (when traced). */
type HookDone = Parameters<onRequestHookHandler>[2];
type Span = NonNullable<ReturnType<Tracing['child']>>;

/** Bearer tokens: each route checks the token for its own scope (RouteSpec.scope), at onRequest. */
export const authentication = fastifyPlugin<AuthenticationOptions>(
  (app, { tokens, metrics, tracing, failureLimit, threads, now }, done) => {
    // Failed authentication, throttled per client address and counted. Only failures take from an address's bucket
    // and only a failure is refused for it (429, Retry-After): a valid token is answered whatever others behind the
    // same address (a proxy, a NAT) got wrong. Per thread, each its share of the limit.
    const failures = failureLimit ? new AuthFailureThrottle(Math.max(1, Math.ceil(failureLimit / threads)), now) : null;
    const refused = (error: unknown, request: FastifyRequest): unknown => {
      const isFailure =
        error instanceof InvalidTokenError || error instanceof ExpiredTokenError || error instanceof MissingScopeError ||
        error instanceof UnauthorizedError || error instanceof MalformedCredentialsError;
      if (!isFailure) return error;
      const retryAfter = failures?.failed(request.ip);
      metrics?.authenticationFailed(retryAfter === undefined ? 'refused' : 'throttled');
      return retryAfter === undefined ? error : new TooManyRequestsError(retryAfter, 'too many failed authentications from this address');
    };

    const failed = (error: unknown, request: FastifyRequest, span: Span | undefined, hookDone: HookDone): void => {
      span?.end(error);
      hookDone(refused(error, request) as Error);
    };
    const admitted = (name: string, request: FastifyRequest, span: Span | undefined, hookDone: HookDone): void => {
      request.tokenName = name;
      span?.end();
      hookDone();
    };

    app.decorateRequest('tokenName', '');
    app.decorate('authenticateFor', (scope: Scope, queryToken = false): onRequestHookHandler => (request, _reply, hookDone) => {
      // Runs at onRequest, before the body is read: an unauthenticated caller learns nothing about validation, and a
      // token without the scope (403) cannot make the server read or parse a body either. A cached token is decided
      // here and now; only one the cache does not hold waits for the store.
      const span = tracing?.child(request.raw, 'authenticate');
      let name: string | Promise<string>;
      try {
        name = tokens.check(presentedToken(request, queryToken), scope);
      } catch (error) {
        failed(error, request, span, hookDone);
        return;
      }
      // A cached token (the usual case) is admitted without a closure made for it.
      if (typeof name === 'string') admitted(name, request, span, hookDone);
      else name.then((resolved) => admitted(resolved, request, span, hookDone), (error: unknown) => failed(error, request, span, hookDone));
    });
    done();
  },
  { name: 'authentication', fastify: '5.x' },
);
