import { parseArgs } from 'node:util';
import { generateToken, hashToken } from '../../auth/tokens.js';
import type { CommandContext } from '../command.js';
import { EXISTING_DATABASE, NEW_OR_EXISTING_DATABASE, withStore } from '../database.js';
import { UsageError } from '../errors.js';

export const usage = `  token create --name NAME    create an API token; prints the token alone on stdout, once
  token list                  list tokens: name, creation time, last use (never the secret)
  token revoke NAME           revoke a token; running servers refuse it within TOKEN_CACHE_MS`;

const TOKEN_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export async function run(args: string[], context: CommandContext): Promise<void> {
  const [action, ...rest] = args;
  switch (action) {
    case 'create': {
      const { values } = parseArgs({ args: rest, options: { name: { type: 'string' } }, strict: true });
      const name = values.name;
      if (!name || !TOKEN_NAME.test(name)) throw new UsageError('token create needs --name NAME (1 to 64 of A-Z a-z 0-9 . _ -)');
      const token = generateToken();
      await withStore(context.config(), NEW_OR_EXISTING_DATABASE, (store) => store.addToken(name, hashToken(token), new Date()));
      process.stdout.write(`${token}\n`);
      process.stderr.write(`created token "${name}"; it is shown only this once, store it now\n`);
      return;
    }
    case 'list': {
      parseArgs({ args: rest, options: {}, strict: true });
      const tokens = await withStore(context.config(), EXISTING_DATABASE, (store) => store.listTokens());
      if (tokens.length === 0) process.stderr.write('no tokens; create one with: plantstore token create --name NAME\n');
      for (const token of tokens) {
        process.stdout.write(
          `${token.name}\tcreated ${token.createdAt.toISOString()}\tlast used ${token.lastUsedAt?.toISOString() ?? 'never'}\n`,
        );
      }
      return;
    }
    case 'revoke': {
      const { positionals } = parseArgs({ args: rest, options: {}, allowPositionals: true, strict: true });
      const [name] = positionals;
      if (!name || positionals.length !== 1) throw new UsageError('token revoke needs exactly one NAME');
      const revoked = await withStore(context.config(), EXISTING_DATABASE, (store) => store.revokeToken(name));
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
