import { readPackageInfo } from '../package-info.js';

export const usage = '  version, --version          print plantstore\'s version';

export function run(): void {
  process.stdout.write(`plantstore ${readPackageInfo().version}\n`);
}
