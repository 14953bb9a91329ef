import { spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { unsupportedNodeMessage } from '../../src/cli/package-info.js';

/**
 * Tools some tests need that a contributor's machine may lack: Debian packages only root installs (Chromium,
 * systemd-analyze, nginx) and a second, older Node.js. `.ci/run` installs every one of them.
 *
 * A test that needs one passes `skipWithout(...)` as its `skip` option: when the tool is missing it is reported as
 * skipped with what is missing and how to get it, so `npm test` passes with everything the machine can run, except
 * where `CI` is set, where a skip would hide a missing check: there the test runs and fails with the same words
 * (`located()` throws them).
 */
export interface Prerequisite {
  /** Where it is; undefined when it is missing. */
  readonly location: string | undefined;
  /** What is missing, why the tests need it, and how to get it. */
  readonly missing: string;
}

/** `name` on the PATH (then in `extra` places), as the shell would find it. */
export function onPath(name: string, extra: readonly string[] = []): string | undefined {
  return firstExecutable([...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean).map((dir) => path.join(dir, name)), ...extra]);
}

function firstExecutable(candidates: readonly string[]): string | undefined {
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

const INSTALLED_BY_CI = '.ci/run installs it';

/** Headless Chromium for the /docs browser test: CHROMIUM_PATH, else `chromium` on the PATH, else /usr/bin/chromium. */
export function chromium(): Prerequisite {
  const given = process.env.CHROMIUM_PATH;
  return {
    location: given ? firstExecutable([given]) : onPath('chromium', ['/usr/bin/chromium']),
    missing:
      `Chromium not found (looked for ${given ?? '`chromium` on the PATH and /usr/bin/chromium'}): the /docs page is only ` +
      `proven to work, offline, in a real browser. Install it (Debian, as root: apt-get update && apt-get install -y chromium; ` +
      `${INSTALLED_BY_CI}) or set CHROMIUM_PATH to a Chromium binary`,
  };
}

/** systemd-analyze, which verifies docs/deploy's units as systemd reads them. */
export function systemdAnalyze(): Prerequisite {
  return {
    location: onPath('systemd-analyze'),
    missing:
      'systemd-analyze not found on the PATH: it verifies the units of docs/deploy as systemd reads them. Install it ' +
      `(Debian, as root: apt-get update && apt-get install -y systemd; ${INSTALLED_BY_CI})`,
  };
}

/** nginx, the reverse proxy of docs/deploy, in front of a real server. */
export function nginx(): Prerequisite {
  return {
    location: onPath('nginx', ['/usr/sbin/nginx']),
    missing:
      'nginx not found (on the PATH or /usr/sbin/nginx): the proxy tests run docs/deploy\'s nginx.conf in front of a real ' +
      `server. Install it (Debian, as root: apt-get update && apt-get install -y nginx; ${INSTALLED_BY_CI})`,
  };
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * A Node.js older than engines.node, to show the CLI refusing it by name: OLD_NODE, else the system's /usr/bin/node
 * (Node 20 on Debian 12). Missing when neither is there or neither is older.
 */
export function olderNode(): Prerequisite {
  const { engines } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
  const candidate = process.env.OLD_NODE || '/usr/bin/node';
  const version = spawnSync(candidate, ['--version'], { encoding: 'utf8' }).stdout?.trim();
  const older = version ? unsupportedNodeMessage(version, engines.node) !== undefined : false;
  return {
    location: older ? candidate : undefined,
    missing:
      `${version ? `${candidate} is ${version}, not` : `no Node.js at ${candidate}, nor one`} older than engines.node (${engines.node}): ` +
      'the tests that show the CLI refusing an unsupported Node.js need one. Set OLD_NODE to it, e.g. ' +
      '(npm install --prefix /tmp/node20 node@20) then OLD_NODE=/tmp/node20/node_modules/node/bin/node; ' +
      `${INSTALLED_BY_CI}`,
  };
}

/**
 * For a test's or suite's `skip` option: the missing prerequisites' messages when any is missing and `CI` is not set,
 * else false (run: where CI is set a missing one then fails the test, through located()).
 */
export function skipWithout(...prerequisites: readonly Prerequisite[]): string | false {
  const absent = prerequisites.filter((prerequisite) => prerequisite.location === undefined);
  if (absent.length === 0 || process.env.CI) return false;
  return `${absent.map((prerequisite) => prerequisite.missing).join('; ')} (skipped because CI is not set; where it is, this fails)`;
}

/** Where the prerequisite is; throws its message when it is missing (where CI is set: see skipWithout). */
export function located(prerequisite: Prerequisite): string {
  if (prerequisite.location === undefined) throw new Error(prerequisite.missing);
  return prerequisite.location;
}

/** Go's toolchain, which builds test/clients/go (Go's net/http default client). */
export function goToolchain(): Prerequisite {
  return {
    location: onPath('go', ['/usr/bin/go', '/usr/lib/go/bin/go']),
    missing: `go not found on the PATH: the real-client tests build a Go net/http client. Install it (Debian, as root: apt-get update && apt-get install -y golang-go; ${INSTALLED_BY_CI})`,
  };
}

/** A Python 3 that imports aiohttp and requests (Debian's /usr/bin/python3 first: a pyenv shim may lack them). */
export function pythonWithHttpClients(): Prerequisite {
  const found = ['/usr/bin/python3', onPath('python3')].find(
    (candidate) => candidate !== undefined && spawnSync(candidate, ['-c', 'import aiohttp, requests'], { stdio: 'ignore' }).status === 0,
  );
  return {
    location: found,
    missing:
      'no python3 that imports aiohttp and requests: the real-client tests drive the server with both. Install them ' +
      `(Debian, as root: apt-get update && apt-get install -y python3-aiohttp python3-requests; ${INSTALLED_BY_CI})`,
  };
}

/** ApacheBench (ab), one of the real clients. */
export function apacheBench(): Prerequisite {
  return {
    location: onPath('ab', ['/usr/bin/ab']),
    missing: `ab not found on the PATH: the real-client tests drive the server with ab -k. Install it (Debian, as root: apt-get update && apt-get install -y apache2-utils; ${INSTALLED_BY_CI})`,
  };
}

/** curl, one of the real clients (curl --parallel). */
export function curl(): Prerequisite {
  return {
    location: onPath('curl', ['/usr/bin/curl']),
    missing: `curl not found on the PATH: the real-client tests drive the server with curl --parallel. Install it (Debian, as root: apt-get update && apt-get install -y curl; ${INSTALLED_BY_CI})`,
  };
}
