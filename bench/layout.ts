/** Where the bench finds the repository and the compiled programs it starts (all under dist/, built by `npm run bench`). */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI } from '../test/helpers/process.js';

/** The repository: this file is dist/bench/layout.js. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** plantstore's CLI, the package's `bin`: `serve`, `token create`, `migrate`. */
export { CLI };

/** The CLI of the plantstore checkout at `root`, where its package.json's `bin` names it, whichever version it is. */
export function cliOf(root: string): string {
  const { bin } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { bin: { plantstore: string } };
  return path.join(root, bin.plantstore);
}
/** The bare node:http ceiling (./ceiling.ts). */
export const CEILING = path.join(ROOT, 'dist/bench/ceiling.js');
/** plantstore's HTTP layer on a store that keeps nothing (./app-only.ts). */
export const APP_ONLY = path.join(ROOT, 'dist/bench/app-only.js');
/** The autocannon load process (./load.ts). */
export const AUTOCANNON_LOAD = path.join(ROOT, 'dist/bench/load.js');

/** Everything the bench runs as a separate program: checked before anything starts. */
export const PROGRAMS = [CLI, CEILING, APP_ONLY, AUTOCANNON_LOAD] as const;
