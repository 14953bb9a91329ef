import { parseArgs } from 'node:util';
import { DEFAULT_SCOPES, UnknownScopeError, parseScopes, type Scope } from '../../auth/scopes.js';
import { generateToken, hashToken } from '../../auth/tokens.js';
import { MAX_DURATION_MS, parseDuration } from '../../config/variables.js';
import type { CommandContext } from '../command.js';
import { EXISTING_DATABASE, NEW_OR_EXISTING_DATABASE, withStore } from '../database.js';
import { UsageError } from '../errors.js';

export const usage = `  token create --name NAME [--scope SCOPE]... [--read-only] [--expires-in DURATION]
                              create an API token; prints the token alone on stdout, once. SCOPE is
                              plants:read, plants:create, plants:delete or metrics:read, repeated or
                              comma-separated (default: the three plants scopes); --read-only is --scope plants:read; DURATION such
                              as 30m, 12h or 90d, from 1m to 366d (default: it never expires)
  token list                  list tokens: name, creation time, last use, scopes, expiry (never the
                              secret); expired tokens are listed until revoked
  token revoke NAME           revoke a token; running servers refuse it within TOKEN_CACHE_MS`;

const TOKEN_NAME = /^[A-Za-z0-9._-]{1,64}$/;
/** The shortest --expires-in: a token that expires sooner could not even be handed over. */
const MIN_TOKEN_LIFETIME_MS = 60_000;

/** The scopes `token create` was asked for: every plants scope unless some are named. */
function tokenScopes(lists: string[] | undefined, readOnly: boolean): Scope[] {
  if (readOnly && lists !== undefined) throw new UsageError('token create takes --read-only or --scope, not both (--read-only is --scope plants:read)');
  if (readOnly) return ['plants:read'];
  if (lists === undefined) return [...DEFAULT_SCOPES];
  try {
    return parseScopes(lists);
  } catch (error) {
    if (error instanceof UnknownScopeError) throw new UsageError(`token create --scope: ${error.message}`);
    throw error;
  }
}

/** When a token made at `from` expires: in whole seconds, rounded up, so that what `token list` prints is what is stored. */
function tokenExpiry(duration: string, from: Date): Date {
  const ms = parseDuration(duration);
  if (ms === undefined || ms < MIN_TOKEN_LIFETIME_MS || ms > MAX_DURATION_MS) {
    throw new UsageError(`token create --expires-in takes a duration from 1m to 366d such as 30m, 12h or 90d, got ${JSON.stringify(duration)}`);
  }
  return new Date(Math.ceil((from.getTime() + ms) / 1000) * 1000);
}

/** A time as token commands print it: ISO 8601 in UTC, without milliseconds when there are none. */
function tokenTime(date: Date): string {
  return date.toISOString().replace(/\.000Z$/, 'Z');
}

export async function run(args: string[], context: CommandContext): Promise<void> {
  const [action, ...rest] = args;
  switch (action) {
    case 'create': {
      const { values } = parseArgs({
        args: rest,
        options: { name: { type: 'string' }, scope: { type: 'string', multiple: true }, 'read-only': { type: 'boolean' }, 'expires-in': { type: 'string' } },
        strict: true,
      });
      const name = values.name;
      if (!name || !TOKEN_NAME.test(name)) throw new UsageError('token create needs --name NAME (1 to 64 of A-Z a-z 0-9 . _ -)');
      const scopes = tokenScopes(values.scope, values['read-only'] === true);
      const createdAt = new Date();
      const expiresAt = values['expires-in'] === undefined ? null : tokenExpiry(values['expires-in'], createdAt);
      const token = generateToken();
      await withStore(context.config(), NEW_OR_EXISTING_DATABASE, (store) => store.tokens.add({ name, hash: hashToken(token), scopes, createdAt, expiresAt }));
      // The token alone on stdout, so that TOKEN=$(plantstore token create ...) keeps working; the rest is for the operator.
      process.stdout.write(`${token}\n`);
      process.stderr.write(
        `created token "${name}" with scopes ${scopes.join(',')}, ${expiresAt ? `expiring ${tokenTime(expiresAt)}` : 'never expiring'}; ` +
          'it is shown only this once, store it now\n',
      );
      return;
    }
    case 'list': {
      parseArgs({ args: rest, options: {}, strict: true });
      const tokens = await withStore(context.config(), EXISTING_DATABASE, (store) => store.tokens.list());
      if (tokens.length === 0) process.stderr.write('no tokens; create one with: plantstore token create --name NAME\n');
      const now = Date.now();
      for (const token of tokens) {
        const { expiresAt } = token;
        // Comma-separated, as --scope takes them, so a column never holds a space.
        const scopes = token.scopes.length === 0 ? 'none' : token.scopes.join(',');
        const expiry = expiresAt === null ? 'expires never' : `${expiresAt.getTime() <= now ? 'expired' : 'expires'} ${tokenTime(expiresAt)}`;
        process.stdout.write(
          `${token.name}\tcreated ${token.createdAt.toISOString()}\tlast used ${token.lastUsedAt?.toISOString() ?? 'never'}\tscopes ${scopes}\t${expiry}\n`,
        );
      }
      return;
    }
    case 'revoke': {
      const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true, strict: true });
      const [name] = positionals;
      if (!name || positionals.length !== 1) throw new UsageError('token revoke needs exactly one NAME');
      const revoked = await withStore(context.config(), EXISTING_DATABASE, (store) => store.tokens.revoke(name));
      if (!revoked) {
        process.stderr.write(`no token named "${name}"\n`);
        process.exitCode = 1;
        return;
      }
      process.stderr.write(`revoked token "${name}"\n`);
      return;
    }
    default:
      throw new UsageError(`unknown token command ${JSON.stringify(action ?? '')}`);
  }
}
