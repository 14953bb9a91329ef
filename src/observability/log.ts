import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config/config.js';
import { redactCredentialHeaders, redactCredentialQuery } from './redact-headers.js';

/** What a request line says of the request (Fastify's own fields), its URL's credential parameters redacted. */
interface LoggedRequest {
  readonly method?: string;
  readonly url?: string;
  readonly host?: string;
  readonly ip?: string;
  readonly socket?: { readonly remotePort?: number };
}

function serializeRequest(request: LoggedRequest): Record<string, unknown> {
  if (typeof request !== 'object' || request === null) return request;
  return {
    method: request.method,
    url: typeof request.url === 'string' ? redactCredentialQuery(request.url) : request.url,
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/**
 * The one logger of a process: pino JSON lines at LOG_LEVEL, on stdout unless a destination is given (tests).
 * Debug request lines carry the request headers (src/http/debug-request-log.ts); no credential in them (a bearer
 * token, a cookie, a proxy's API key) may reach a log. Pino's redact paths name fixed keys, and a proxy may add any header, so a
 * serializer decides; every logger made here has it, so no caller can make one without it. The request's URL is
 * logged with the values of credential-like query parameters redacted (redactCredentialQuery).
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  const options = { level: config.logLevel, serializers: { headers: redactCredentialHeaders, req: serializeRequest } };
  return destination ? pino(options, destination) : pino(options);
}
