import { MalformedCredentialsError, UnauthorizedError } from './errors.js';

/** RFC 6750 §2.1 b64token. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** RFC 7235 §2.1 auth-scheme: a token. */
const SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+/;
/** RFC 7235 §2.1 separates the scheme from its credentials with 1*SP: SP only, so a TAB makes the header malformed. */
const SEPARATED_TOKEN = /^ +(.*)$/s;

const AUTHORIZATION = 'authorization';

const AUTHENTICATION_REQUIRED = 'authentication required: send Authorization: Bearer <token>';

const BEARER_PREFIX = 'Bearer ';

/** Whether `code` is a character of an RFC 6750 b64token before its trailing `=`s: A-Z a-z 0-9 - . _ ~ + / */
function isTokenChar(code: number): boolean {
  return (
    (code >= 0x61 && code <= 0x7a) || (code >= 0x41 && code <= 0x5a) || (code >= 0x30 && code <= 0x39) ||
    code === 0x2d || code === 0x2e || code === 0x5f || code === 0x7e || code === 0x2b || code === 0x2f
  );
}

/**
 * The token of the header every client sends, `Bearer ` and one b64token, read in one pass; undefined for anything
 * else (another spelling of the scheme, more spaces, a malformed token), which readBearerToken then reads in full.
 */
function wellFormedBearer(header: string): string | undefined {
  if (!header.startsWith(BEARER_PREFIX)) return undefined;
  const length = header.length;
  let index = BEARER_PREFIX.length;
  while (index < length && isTokenChar(header.charCodeAt(index))) index += 1;
  if (index === BEARER_PREFIX.length) return undefined;
  while (index < length && header.charCodeAt(index) === 0x3d) index += 1;
  return index === length ? header.slice(BEARER_PREFIX.length) : undefined;
}

/** The token of an `Authorization: Bearer <token>` header; the scheme name is case-insensitive (RFC 7235). */
export function readBearerToken(header: string | undefined): string {
  const token = header === undefined ? undefined : wellFormedBearer(header);
  return token ?? readAnyBearerToken(header);
}

function readAnyBearerToken(header: string | undefined): string {
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
    const name = rawHeaders[index] as string;
    // Most names differ in length, which is compared first: no lower-cased copy of every name.
    if (name.length !== AUTHORIZATION.length || name.toLowerCase() !== AUTHORIZATION) continue;
    if (value !== undefined) throw new MalformedCredentialsError('more than one Authorization header: send exactly one');
    value = rawHeaders[index + 1] as string;
  }
  return value;
}
