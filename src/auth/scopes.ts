/**
 * What a token may do. Each operation of the API needs one scope (its route declares it); a token holds any of
 * them. The names are written as they appear in `WWW-Authenticate` (RFC 6750 §3) and in the OpenAPI document.
 */
export const SCOPES = ['plants:read', 'plants:create', 'plants:delete', 'metrics:read'] as const;

export type Scope = (typeof SCOPES)[number];

/**
 * What `plantstore token create` grants when no scope is named: every operation on plants. Reading the metrics is
 * asked for by name (`--scope metrics:read`): a scraper's token need not touch plants, nor a client's read load figures.
 */
export const DEFAULT_SCOPES: readonly Scope[] = ['plants:read', 'plants:create', 'plants:delete'];

/** What each scope lets a token do, in the words of a refusal: "this token may not create plants". */
export const SCOPE_ACTIONS: Readonly<Record<Scope, string>> = {
  'plants:read': 'read plants',
  'plants:create': 'create plants',
  'plants:delete': 'delete plants',
  'metrics:read': 'read the metrics',
};

export function isScope(name: string): name is Scope {
  return (SCOPES as readonly string[]).includes(name);
}

/** A scope name that is not one of SCOPES. */
export class UnknownScopeError extends Error {
  constructor(readonly scope: string) {
    super(`unknown scope ${JSON.stringify(scope)}; the scopes are ${SCOPES.join(', ')}`);
    this.name = 'UnknownScopeError';
  }
}

/**
 * The scopes named by `lists`, each a scope or a comma-separated list of them (as `--scope` takes them), in the
 * order of SCOPES and each once. Throws UnknownScopeError for a name that is not a scope, an empty one included.
 */
export function parseScopes(lists: readonly string[]): Scope[] {
  const named = new Set<string>();
  for (const list of lists) {
    for (const name of list.split(',')) {
      const trimmed = name.trim();
      if (!isScope(trimmed)) throw new UnknownScopeError(trimmed);
      named.add(trimmed);
    }
  }
  return SCOPES.filter((scope) => named.has(scope));
}

/**
 * The scopes a stored token holds, as a set to check requests against. A name this plantstore does not know (written
 * by a newer one) grants nothing here.
 */
export function grantedScopes(names: readonly string[]): ReadonlySet<Scope> {
  return new Set(names.filter(isScope));
}
