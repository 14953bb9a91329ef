import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.js';

/**
 * The one logger of a process: pino JSON lines at LOG_LEVEL. Debug request lines carry the request headers
 * (src/app.ts); the bearer token in them must never reach a log.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  const options = {
    level: config.logLevel,
    redact: { paths: ['headers.authorization', 'req.headers.authorization'], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
