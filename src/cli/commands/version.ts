import { readPackageInfo } from '../package-info.js';

export const usage = '  version, --version          print plantstore\'s version';

/** version opens no database: its --help does not point at DATABASE_URL. */
export const readsDatabase = false;

export function run(): void {
  process.stdout.write(`plantstore ${readPackageInfo().version}\n`);
}
