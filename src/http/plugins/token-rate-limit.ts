import rateLimit from '@fastify/rate-limit';
import type { FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import type { RateLimitConfig } from '../../config/config.js';
import { TooManyRequestsError } from '../errors.js';
import { LocalBucketCells, TokenBucketStore, tokenBucketStore, type BucketCells } from '../rate-limit.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Per-token rate limiting (RATE_LIMIT_MAX), or null when it is off. */
    tokenRateLimit: TokenRateLimit | null;
  }
}

interface TokenRateLimit {
  /**
   * A route's onRequest hook (@fastify/rate-limit's, as it types it), after authentication (keyed by the token's
   * name) and before the body is read, so a limited client costs no parsing; 429 is an Error record with Retry-After.
   */
  readonly onRequest: preHandlerAsyncHookHandler;
  /**
   * Rate limiting of a streamed bulk create: besides the request itself (counted at onRequest like any), each line
   * takes one token of the same bucket; when the bucket is empty the stream waits for the next token (reading pauses)
   * rather than refusing the line, so a bulk stream creates at the token's rate and no faster.
   */
  readonly admitLine: (request: FastifyRequest) => Promise<void>;
}

export interface TokenRateLimitOptions {
  /** RATE_LIMIT_MAX, _WINDOW_MS and _BURST; null leaves rate limiting off. */
  readonly config: RateLimitConfig | null;
  /** The clock buckets refill by (AppOptions.now). */
  readonly now: (() => number) | undefined;
  /** Where the buckets are kept (AppOptions.rateLimitCells): this app's own by default. */
  readonly cells: BucketCells | undefined;
}

/** A token bucket per token (src/http/rate-limit.ts), served through @fastify/rate-limit. */
export const tokenRateLimit = fastifyPlugin<TokenRateLimitOptions>(
  async (app, { config, now, cells = new LocalBucketCells() }) => {
    if (!config) {
      app.decorate('tokenRateLimit', null);
      return;
    }
    await app.register(rateLimit, {
      global: false,
      // The bucket decides; the plugin compares its answer with the burst and sends the headers and the 429.
      store: tokenBucketStore(config, now, cells),
      max: config.burst,
      timeWindow: config.windowMs,
      keyGenerator: (request) => request.tokenName,
      errorResponseBuilder: (_request, context) => new TooManyRequestsError(Math.max(1, Math.ceil(context.ttl / 1000))),
    });
    // The plugin's store and the per-line admission of streamed bulk creates share the buckets.
    const lines = new TokenBucketStore(config, now, cells);
    app.decorate('tokenRateLimit', {
      onRequest: app.rateLimit(),
      admitLine: (request) =>
        new Promise<void>((resolve, reject) => {
          const attempt = () =>
            lines.incr(request.tokenName, (error, result) => {
              if (error) reject(error);
              else if (result && result.current > config.burst) setTimeout(attempt, Math.max(1, result.ttl));
              else resolve();
            });
          attempt();
        }),
    });
  },
  { name: 'token-rate-limit', fastify: '5.x', dependencies: ['authentication'] },
);
