import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';

/**
 * Fastify's request lines (its logController option). Per-request lines at info would cost more than a create
 * itself; they are logged at debug instead, with the request's headers (what an operator debugging a client needs),
 * every credential-bearing one redacted by the logger's `headers` serializer (redactCredentialHeaders). Their
 * argument objects are built only when debug prints: the level is asked first.
 */
export class DebugRequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if ((request.log as unknown as Pick<Logger, 'isLevelEnabled'>).isLevelEnabled('debug')) request.log.debug({ req: request, headers: request.headers }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if ((request.log as unknown as Pick<Logger, 'isLevelEnabled'>).isLevelEnabled('debug')) request.log.debug({ res: reply, err: error ?? undefined, responseTime: reply.elapsedTime }, 'request completed');
  }
}
