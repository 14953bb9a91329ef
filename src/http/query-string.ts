import { BadRequestError } from './errors.js';

/** Where parseQueryString leaves the error for a query string that is not valid percent-encoded UTF-8. */
export const QUERY_ERROR = Symbol('queryError');

export type ParsedQuery = Record<string, string | string[]> & { [QUERY_ERROR]?: BadRequestError };

/** Form-style decoding (`+` is a space), strict: malformed escapes and invalid UTF-8 give undefined. */
function decode(text: string): string | undefined {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

/**
 * The router's query string parser: like Fastify's default (repeated names become arrays, `+` is a space), except
 * that a malformed escape (`%`, `%FF`, `%ZZ`) is an error rather than literal text, as it already is in the path;
 * otherwise `tag=%FF` would list plants tagged with the three characters `%FF`, the same as `tag=%25FF`.
 *
 * The parser runs inside the router, where a throw would escape Fastify's error handling, so the error travels on
 * the result under QUERY_ERROR and is thrown by a preValidation hook (after authentication: a stranger gets 401).
 */
export function parseQueryString(query: string): ParsedQuery {
  const result = Object.create(null) as ParsedQuery;
  if (query === '') return result;
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const name = decode(equals === -1 ? pair : pair.slice(0, equals));
    if (name === undefined) {
      result[QUERY_ERROR] ??= new BadRequestError('a query parameter name is not valid percent-encoded UTF-8');
      continue;
    }
    const value = equals === -1 ? '' : decode(pair.slice(equals + 1));
    if (value === undefined) {
      result[QUERY_ERROR] ??= new BadRequestError(`querystring.${name} is not valid percent-encoded UTF-8`);
      continue;
    }
    const previous = result[name];
    // Appended in place: copying the array for every repeat would make `a&a&a&…` quadratic in the query's length.
    if (previous === undefined) result[name] = value;
    else if (Array.isArray(previous)) previous.push(value);
    else result[name] = [previous, value];
  }
  return result;
}
