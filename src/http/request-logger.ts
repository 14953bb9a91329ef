import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, LevelWithSilentOrString, Logger } from 'pino';

type LevelMethod = Level;

/**
 * A request's logger that becomes the pino child Fastify would make (bound to the request id, as `reqId`) only when
 * something logs at a level that prints: a create answered 200 logs nothing at the default level, so most requests
 * never build one. A call at a level the process does not print returns at once; every line that is written carries
 * the request's bindings exactly as the eager child's would.
 */
class RequestLogger {
  readonly #parent: Logger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;

  constructor(parent: Logger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get #logger(): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options) as FastifyBaseLogger);
  }

  #write(level: LevelMethod, line: unknown[]): void {
    if (this.#child === undefined && !this.#parent.isLevelEnabled(level)) return;
    (this.#logger[level] as (...args: unknown[]) => void)(...line);
  }

  // Methods on the prototype, not a closure per level per request: a request that logs nothing allocates nothing here.
  fatal(...line: unknown[]): void {
    this.#write('fatal', line);
  }

  error(...line: unknown[]): void {
    this.#write('error', line);
  }

  warn(...line: unknown[]): void {
    this.#write('warn', line);
  }

  info(...line: unknown[]): void {
    this.#write('info', line);
  }

  debug(...line: unknown[]): void {
    this.#write('debug', line);
  }

  trace(...line: unknown[]): void {
    this.#write('trace', line);
  }

  silent(): void {}

  get level(): LevelWithSilentOrString {
    return this.#child?.level ?? this.#parent.level;
  }

  set level(level: LevelWithSilentOrString) {
    this.#logger.level = level;
  }

  isLevelEnabled(level: LevelWithSilentOrString): boolean {
    return ((this.#child as Logger | undefined) ?? this.#parent).isLevelEnabled(level);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger.child(bindings, options);
  }
}

/**
 * Fastify's childLoggerFactory: the request's logger made lazily (RequestLogger) on the app's pino logger. A route
 * with its own log level gets the eager child, since its level is not the parent's.
 */
export const lazyRequestLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (logger, bindings, options) => {
  const parent = logger as unknown as Partial<Logger>;
  if (options.level !== undefined || typeof parent.isLevelEnabled !== 'function') return logger.child(bindings, options);
  return new RequestLogger(parent as Logger, bindings, options) as unknown as FastifyBaseLogger;
};
