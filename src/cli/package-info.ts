/**
 * What package.json says about plantstore, read when the CLI runs so that each fact has one source: its version
 * (`plantstore --version`) and the Node.js releases it supports (`engines.node`, which npm checks at install).
 *
 * The launcher reads this before anything that needs a supported Node is loaded, so it uses Node's own modules only
 * and syntax every Node still in use parses.
 */
import { readFileSync } from 'node:fs';

export interface PackageInfo {
  readonly version: string;
  /** `engines.node`, e.g. `>=22` */
  readonly nodeRange: string;
}

/** package.json, three folders up from dist/src/cli/ in a checkout and in an installed package alike. */
const PACKAGE_JSON = new URL('../../../package.json', import.meta.url);

export function readPackageInfo(): PackageInfo {
  const parsed = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { version?: unknown; engines?: { node?: unknown } };
  const { version } = parsed;
  const nodeRange = parsed.engines?.node;
  if (typeof version !== 'string' || typeof nodeRange !== 'string') {
    throw new Error(`${PACKAGE_JSON.pathname} has no version or engines.node`);
  }
  return { version, nodeRange };
}

/**
 * The lowest release `range` accepts and how to name it. Only the one form package.json uses, `>=MAJOR[.MINOR[.PATCH]]`;
 * anything else throws, so a change to `engines` that this does not understand fails loudly (test/unit/package-info.test.ts
 * reads the real one).
 */
export function minimumNode(range: string): { readonly parts: readonly number[]; readonly label: string } {
  const match = /^\s*>=\s*v?(\d+(?:\.\d+){0,2})\s*$/.exec(range);
  if (!match) throw new Error(`engines.node ${JSON.stringify(range)} is not of the form >=MAJOR[.MINOR[.PATCH]]`);
  const label = match[1] as string;
  return { parts: label.split('.').map(Number), label };
}

/** The one line to print when `running` (process.version, e.g. `v20.20.2`) is older than `range` allows; else undefined. */
export function unsupportedNodeMessage(running: string, range: string): string | undefined {
  const { parts: required, label } = minimumNode(range);
  const current = running.replace(/^v/, '').split(/[.-]/).slice(0, 3).map(Number);
  for (let index = 0; index < required.length; index += 1) {
    const have = current[index] ?? 0;
    const need = required[index] ?? 0;
    if (have > need) return undefined;
    if (have < need) return `plantstore needs Node.js ${label} or later; this is ${running}`;
  }
  return undefined;
}
