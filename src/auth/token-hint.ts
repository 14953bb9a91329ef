/**
 * What `serve` prints when the database holds no token: the command that creates one, spelled for the way this
 * plantstore was started and for the database it serves. A checkout runs `npx plantstore`; an installed package runs
 * its `bin` link (/opt/plantstore/bin/plantstore), from any folder, so its hint names the SQLite file by its
 * absolute path: followed from another folder, `DATABASE_URL`'s default (relative to the folder a command starts in)
 * would make a new, empty database that the server never reads.
 */
import path from 'node:path';
import { DEFAULT_DATABASE_URL, type DatabaseConfig } from '../config/config.js';

/** Placeholder for a password left out of a PostgreSQL URL: the hint is printed where logs go, and secrets never are. */
const PASSWORD_PLACEHOLDER = 'PASSWORD';

/**
 * The lines `serve` prints on stderr when no token exists. `invokedAs` is the script the process runs
 * (process.argv[1]: a bin link keeps its own path there), `cwd` the folder it started in.
 */
export function noTokenMessage(database: DatabaseConfig, invokedAs: string | undefined, cwd: string): string {
  const command = plantstoreCommand(invokedAs);
  const url = databaseUrlFor(database, command === CHECKOUT_COMMAND, cwd);
  const lines = [
    'plantstore: no API token exists yet, so every request to /plants will be refused with 401.',
    `plantstore: create one with:  ${url === undefined ? '' : `DATABASE_URL=${shellWord(url.text)} `}${command} token create --name <name>`,
  ];
  if (url?.passwordLeftOut) lines.push(`plantstore: (${PASSWORD_PLACEHOLDER} stands for the password in the server's DATABASE_URL)`);
  return `${lines.join('\n')}\n`;
}

/** How a checkout (or a project that installed plantstore) runs the CLI: from its folder, through npm. */
const CHECKOUT_COMMAND = 'npx plantstore';

/** The command that runs this same plantstore again, from any folder when it is installed. */
export function plantstoreCommand(invokedAs: string | undefined): string {
  if (invokedAs === undefined) return CHECKOUT_COMMAND;
  const script = invokedAs.split(path.sep).join('/');
  // A project's own bin links (and npx's): npx finds them again from the project's folder.
  if (script.includes('/node_modules/.bin/')) return CHECKOUT_COMMAND;
  // An installed bin link (npm install -g: PREFIX/bin/plantstore): the same path works from anywhere.
  if (path.basename(script) === 'plantstore') return shellWord(invokedAs);
  // The installed package's CLI run by its file (node /opt/…/node_modules/plantstore/dist/src/cli/plantstore.js).
  if (script.includes('/node_modules/') && script.endsWith('/cli/plantstore.js')) return `node ${shellWord(invokedAs)}`;
  // A checkout: npm start, npx plantstore, node dist/src/cli/plantstore.js.
  return CHECKOUT_COMMAND;
}

/**
 * The DATABASE_URL the hint must set, or undefined when the command finds the server's database by itself: only a
 * checkout's command, started in the same folder, on the default SQLite file.
 */
function databaseUrlFor(
  database: DatabaseConfig,
  fromCheckout: boolean,
  cwd: string,
): { readonly text: string; readonly passwordLeftOut: boolean } | undefined {
  if (database.kind === 'sqlite') {
    const defaultFile = path.resolve(cwd, DEFAULT_DATABASE_URL.slice('sqlite:'.length));
    if (fromCheckout && database.path === defaultFile) return undefined;
    return { text: `sqlite:${database.path}`, passwordLeftOut: false };
  }
  const url = new URL(database.url);
  let passwordLeftOut = false;
  if (url.password !== '') {
    url.password = PASSWORD_PLACEHOLDER;
    passwordLeftOut = true;
  }
  // pg also reads a password (and a key's passphrase, sslpassword) from the query string.
  for (const name of [...url.searchParams.keys()]) {
    if (/pass/i.test(name)) {
      url.searchParams.set(name, PASSWORD_PLACEHOLDER);
      passwordLeftOut = true;
    }
  }
  return { text: url.href, passwordLeftOut };
}

/** `word` as one word of a POSIX shell command line: as it is when nothing in it is special, else single-quoted. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
