import type { IncomingHttpHeaders } from 'node:http';

export const REDACTED = '[redacted]';

/**
 * Header names that carry credentials: the standard ones (Authorization, Proxy-Authorization, Cookie, Set-Cookie)
 * and those proxies and gateways make up for keys and tokens (X-Api-Key, X-Auth-Token, X-Amz-Security-Token,
 * X-Csrf-Token, Private-Token, X-Client-Secret, X-Session-Id, ...). Names are matched on fragments rather than a
 * list because an operator's proxy can add any name; redacting a harmless header costs a debug line some detail,
 * logging a secret cannot be undone. "key" and "signature" count only as whole words, so that Keep-Alive stays.
 */
const CREDENTIAL_NAME = /auth|cookie|token|secret|passw|pwd|credential|session|apikey|jwt|(?:^|[-_])(?:key|signature)(?:[-_]|$)/i;

/** Whether a header of this name may carry a credential, and so must never reach a log. */
export function isCredentialHeader(name: string): boolean {
  return CREDENTIAL_NAME.test(name);
}

/**
 * A copy of request headers for a log line, every credential-bearing value replaced by `[redacted]`; the name stays,
 * so the line still says the header was sent. A pino serializer: it runs only for lines actually written, which
 * are the debug request lines, so requests at the usual levels pay nothing for it.
 */
export function redactCredentialHeaders(headers: IncomingHttpHeaders): Record<string, unknown> {
  // Pino hands over whatever a line put under `headers`; only an object of headers has anything to redact.
  if (typeof headers !== 'object' || headers === null) return headers;
  const copy: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(headers)) copy[name] = isCredentialHeader(name) ? REDACTED : value;
  return copy;
}
