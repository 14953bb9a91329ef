/**
 * readBearerToken: the Authorization header under RFC 6750 §2.1 (`Bearer` 1*SP b64token, the scheme case-insensitive)
 * and §3.1 (no credentials: 401 with a bare challenge; malformed: 400 invalid_request).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readBearerToken } from '../../src/http/bearer.js';
import { MalformedCredentialsError, UnauthorizedError } from '../../src/http/errors.js';

const CHALLENGE = 'Bearer realm="plantstore"';

/** 401 with the bare challenge: no credentials, or not Bearer ones. No error code (RFC 6750 §3.1). */
const NO_CREDENTIALS = {
  name: UnauthorizedError.name,
  status: 401,
  message: 'authentication required: send Authorization: Bearer <token>',
  headers: { 'www-authenticate': CHALLENGE },
};
const ANOTHER_SCHEME = {
  name: UnauthorizedError.name,
  status: 401,
  message: 'authentication scheme is not Bearer: send Authorization: Bearer <token>',
  headers: { 'www-authenticate': CHALLENGE },
};
const MALFORMED = {
  name: MalformedCredentialsError.name,
  status: 400,
  message: 'malformed Authorization header: expected Bearer, a space, and one token',
  headers: { 'www-authenticate': `${CHALLENGE}, error="invalid_request"` },
};

describe('readBearerToken', () => {
  const accepted: ReadonlyArray<readonly [header: string, token: string]> = [
    ['Bearer abc', 'abc'],
    ['bearer x', 'x'],
    ['BEARER x', 'x'],
    ['BeArEr x', 'x'],
    // 1*SP: any number of spaces.
    ['Bearer  x', 'x'],
    ['Bearer     x', 'x'],
    // Whitespace around the whole value is not part of it (RFC 9110 §5.5).
    ['  Bearer x  ', 'x'],
    ['Bearer x\t', 'x'],
    // Every character b64token allows, and its trailing '='s.
    ['Bearer AZaz09-._~+/', 'AZaz09-._~+/'],
    ['Bearer x=', 'x='],
    ['Bearer x==', 'x=='],
    ['Bearer ' + 'a'.repeat(4096), 'a'.repeat(4096)],
  ];
  for (const [header, token] of accepted) {
    it(`${JSON.stringify(header.length > 60 ? `${header.slice(0, 20)}…` : header)} → the token`, () => {
      assert.equal(readBearerToken(header), token);
    });
  }

  const refused: ReadonlyArray<readonly [header: string | undefined, expected: object]> = [
    [undefined, NO_CREDENTIALS],
    ['', NO_CREDENTIALS],
    ['   ', NO_CREDENTIALS],
    // `Bearer` with no token carries no credentials.
    ['Bearer', NO_CREDENTIALS],
    ['bearer', NO_CREDENTIALS],
    ['Bearer ', NO_CREDENTIALS],
    ['Bearer    ', NO_CREDENTIALS],
    ['Basic dXNlcjpwYXNz', ANOTHER_SCHEME],
    ['Token x', ANOTHER_SCHEME],
    ['Bearerx', ANOTHER_SCHEME],
    ['Bearer-x y', ANOTHER_SCHEME],
    ['x', ANOTHER_SCHEME],
    ['=Bearer x', ANOTHER_SCHEME],
    // RFC 7235 separates scheme and token with SP only: a TAB is a malformed Bearer header, not another scheme.
    ['Bearer\tx', MALFORMED],
    ['Bearer \tx', MALFORMED],
    ['Bearer\u00a0x', MALFORMED],
    // One token only.
    ['Bearer x y', MALFORMED],
    ['Bearer x  y', MALFORMED],
    ['Bearer x,y', MALFORMED],
    ['Bearer x, Bearer y', MALFORMED],
    ['Bearer,x', MALFORMED],
    // Characters outside b64token, and '=' anywhere but the end.
    ['Bearer a"b', MALFORMED],
    ['Bearer a\\b', MALFORMED],
    ['Bearer a:b', MALFORMED],
    ['Bearer a;b', MALFORMED],
    ['Bearer a%20b', MALFORMED],
    ['Bearer é', MALFORMED],
    ['Bearer =x', MALFORMED],
    ['Bearer x=y', MALFORMED],
    ['Bearer =', MALFORMED],
    ['Bearer x\u0000', MALFORMED],
  ];
  for (const [header, expected] of refused) {
    const { status } = expected as { status: number };
    it(`${JSON.stringify(header) ?? 'no header'} → ${status}${expected === MALFORMED ? ' invalid_request' : expected === ANOTHER_SCHEME ? ', another scheme' : ', no credentials'}`, () => {
      assert.throws(() => readBearerToken(header), expected);
    });
  }

  it('never echoes what it refuses: under another scheme the credentials may be a password', () => {
    assert.throws(
      () => readBearerToken('Basic c2VjcmV0LXBhc3N3b3Jk'),
      (error: Error) => !error.message.includes('c2VjcmV0LXBhc3N3b3Jk'),
    );
    assert.throws(
      () => readBearerToken('Bearer secret token'),
      (error: Error) => !error.message.includes('secret'),
    );
  });
});
