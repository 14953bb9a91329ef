import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.js';
import { redactCredentialHeaders } from './http/redact-headers.js';

/**
 * The one logger of a process: pino JSON lines at LOG_LEVEL, on stdout unless a destination is given (tests).
 * Debug request lines carry the request headers (src/app.ts); no credential in them (a bearer token, a cookie, a
 * proxy's API key) may reach a log. Pino's redact paths name fixed keys, and a proxy may add any header, so a
 * serializer decides; every logger made here has it, so no caller can make one without it.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  const options = { level: config.logLevel, serializers: { headers: redactCredentialHeaders } };
  return destination ? pino(options, destination) : pino(options);
}
