import { MalformedCredentialsError, UnauthorizedError } from './errors.js';

/** RFC 6750 §2.1 b64token. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** RFC 7235 §2.1 auth-scheme: a token. */
const SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+/;
/** RFC 7235 §2.1 separates the scheme from its credentials with 1*SP: SP only, so a TAB makes the header malformed. */
const SEPARATED_TOKEN = /^ +(.*)$/s;

const AUTHENTICATION_REQUIRED = 'authentication required: send Authorization: Bearer <token>';

/** The token of an `Authorization: Bearer <token>` header; the scheme name is case-insensitive (RFC 7235). */
export function readBearerToken(header: string | undefined): string {
  const credentials = header?.trim() ?? '';
  if (credentials === '') throw new UnauthorizedError(AUTHENTICATION_REQUIRED);
  const scheme = SCHEME.exec(credentials)?.[0] ?? '';
  // The rejected credentials are never echoed: under another scheme they may be a password.
  if (scheme.toLowerCase() !== 'bearer') throw new UnauthorizedError('authentication scheme is not Bearer: send Authorization: Bearer <token>');
  const rest = credentials.slice(scheme.length);
  // RFC 6750 §3.1: a request that lacks authentication information gets the bare challenge, without an error code;
  // `Bearer` with no token carries none.
  if (rest === '') throw new UnauthorizedError(AUTHENTICATION_REQUIRED);
  const token = SEPARATED_TOKEN.exec(rest)?.[1];
  if (token === undefined || !B64TOKEN.test(token)) {
    throw new MalformedCredentialsError('malformed Authorization header: expected Bearer, a space, and one token');
  }
  return token;
}

/**
 * The value of the request's one Authorization field, from Node's raw header list (Node keeps only the first of
 * several). RFC 9110 §11.6.2 allows one credentials value; with two, a proxy that keeps the last would see other
 * credentials than we do, so the request is refused rather than either one chosen.
 */
export function singleAuthorization(rawHeaders: readonly string[]): string | undefined {
  let value: string | undefined;
  for (let index = 0; index < rawHeaders.length; index += 2) {
    if ((rawHeaders[index] as string).toLowerCase() !== 'authorization') continue;
    if (value !== undefined) throw new MalformedCredentialsError('more than one Authorization header: send exactly one');
    value = rawHeaders[index + 1] as string;
  }
  return value;
}
