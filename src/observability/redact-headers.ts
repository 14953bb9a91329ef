import type { IncomingHttpHeaders } from 'node:http';

const REDACTED = '[redacted]';

/**
 * Header names that carry credentials: the standard ones (Authorization, Proxy-Authorization, Cookie, Set-Cookie)
 * and those proxies and gateways make up for keys and tokens (X-Api-Key, X-Auth-Token, X-Amz-Security-Token,
 * X-Csrf-Token, Private-Token, X-Client-Secret, X-Session-Id, ...). Names are matched on fragments rather than a
 * list because an operator's proxy can add any name; redacting a harmless header costs a debug line some detail,
 * logging a secret cannot be undone. "key" and "signature" count only as whole words, so that Keep-Alive stays.
 */
const CREDENTIAL_NAME = /auth|cookie|token|secret|passw|pwd|credential|session|apikey|jwt|(?:^|[-_])(?:key|signature)(?:[-_]|$)/i;

/** Whether a header of this name may carry a credential, and so must never reach a log. */
function isCredentialHeader(name: string): boolean {
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

/**
 * Query parameter names that carry credentials: every name a header would be redacted for (access_token, api_key,
 * apikey, secret, password, passwd, auth, session, signature, X-Amz-Signature, X-Amz-Credential, ...) and the short
 * ones URLs use for signed links and OAuth (sig, key, code, otp).
 */
const CREDENTIAL_PARAMETER = /^(?:sig|code|otp)$/i;

/**
 * `url` for a log line: the value of every query parameter named like a credential replaced by `[redacted]`, the
 * name kept. A client that sends `?access_token=…` is refused (tokens go in Authorization), but the URL it sent
 * still reaches the debug request line. Names are compared decoded (`access%5Ftoken` is `access_token`).
 */
export function redactCredentialQuery(url: string): string {
  const question = url.indexOf('?');
  if (question === -1) return url;
  const pairs = url.slice(question + 1).split('&');
  let changed = false;
  for (let index = 0; index < pairs.length; index += 1) {
    const pair = pairs[index] as string;
    const equals = pair.indexOf('=');
    if (equals === -1) continue;
    let name = pair.slice(0, equals);
    try {
      name = decodeURIComponent(name.replaceAll('+', ' '));
    } catch {
      // A malformed escape: judged as written.
    }
    if (isCredentialHeader(name) || CREDENTIAL_PARAMETER.test(name)) {
      pairs[index] = `${pair.slice(0, equals)}=${REDACTED}`;
      changed = true;
    }
  }
  return changed ? `${url.slice(0, question)}?${pairs.join('&')}` : url;
}
