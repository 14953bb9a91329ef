/**
 * The systemd units of docs/deploy are checked, not only written: `systemd-analyze verify` reads each as systemd
 * would (unknown keys, bad values, a missing executable), on a root folder holding systemd's own units and the
 * installed command where docs/deploy/README.md installs it. Without systemd-analyze that check is skipped, saying how
 * to install it, or fails where CI is set (helpers/prerequisites.ts; .ci/run installs it). And each unit holds what the deployment promises:
 * a dedicated user, sandboxing, restart on failure, and a SIGTERM stop with time for the server's own shutdown.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { located, skipWithout, systemdAnalyze } from '../helpers/prerequisites.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const DEPLOY = path.join(ROOT, 'docs', 'deploy');
/** Where systemd's own units are on Debian. */
const SYSTEM_UNITS = ['/usr/lib/systemd/system', '/lib/systemd/system'].find((dir) => fs.existsSync(path.join(dir, 'sysinit.target')));

/** `Key=value` lines of a unit file's [section], in order; continuation lines and comments left out. */
function directives(file: string, section: string): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  let current = '';
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const header = /^\[(\w+)\]\s*$/.exec(line);
    if (header) current = header[1] as string;
    else if (current === section && /^\w+=/.test(line)) {
      const at = line.indexOf('=');
      found.push([line.slice(0, at), line.slice(at + 1).trim()]);
    }
  }
  return found;
}

function value(file: string, section: string, key: string): string | undefined {
  return directives(file, section).findLast(([name]) => name === key)?.[1];
}

/** Seconds of a systemd time span such as 20, 20s, 1min 30s. */
function seconds(span: string): number {
  let total = 0;
  for (const [, amount, unit] of span.matchAll(/(\d+)\s*(ms|s|sec|min|m|h)?/g)) {
    const factor = { ms: 0.001, s: 1, sec: 1, min: 60, m: 60, h: 3600 }[unit ?? 's'] ?? 1;
    total += Number(amount) * factor;
  }
  return total;
}

let root: string;
/** The command the units start, as docs/deploy/README.md installs it (npm install -g --prefix PREFIX). */
let installedCommand: string;

before(() => {
  const guide = fs.readFileSync(path.join(DEPLOY, 'README.md'), 'utf8');
  const prefix = /npm install -g --prefix (\S+)/.exec(guide)?.[1];
  assert.ok(prefix, 'docs/deploy/README.md installs the package with npm install -g --prefix');
  installedCommand = path.join(prefix, 'bin', 'plantstore');
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-deploy-'));
  // systemd's own units come with systemd-analyze (Debian's systemd package); verify needs them, nothing else does.
  if (SYSTEM_UNITS) fs.cpSync(SYSTEM_UNITS, path.join(root, 'usr/lib/systemd/system'), { recursive: true });
  fs.mkdirSync(path.join(root, 'etc/systemd/system'), { recursive: true });
  fs.mkdirSync(path.join(root, path.dirname(installedCommand)), { recursive: true });
  // What `npm install -g` puts there is a link to the CLI; verify needs only an executable at that path.
  fs.writeFileSync(path.join(root, installedCommand), '#!/bin/sh\n', { mode: 0o755 });
  // ExecReload= runs `kill` from systemd's search path, which verify looks up under the root: the host's own.
  const kill = ['/usr/bin/kill', '/bin/kill'].find((file) => fs.existsSync(file));
  assert.ok(kill, 'kill is installed (Debian: procps)');
  fs.mkdirSync(path.join(root, 'usr/bin'), { recursive: true });
  fs.copyFileSync(kill, path.join(root, 'usr/bin/kill'));
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

for (const { file, verifyAs } of [
  { file: 'plantstore.service', verifyAs: 'plantstore.service' },
  { file: 'plantstore@.service', verifyAs: 'plantstore@8081.service' },
]) {
  describe(`docs/deploy/${file}`, () => {
    const unit = path.join(DEPLOY, file);

    it(`passes systemd-analyze verify (as ${verifyAs}) with nothing to say`, { skip: skipWithout(systemdAnalyze()) }, () => {
      const analyze = located(systemdAnalyze());
      assert.ok(SYSTEM_UNITS, "systemd's own units (sysinit.target) are installed: apt-get install -y systemd");
      fs.copyFileSync(unit, path.join(root, 'etc/systemd/system', file));
      const result = spawnSync(analyze, ['verify', `--root=${root}`, verifyAs], { encoding: 'utf8', timeout: 60_000 });
      assert.ifError(result.error ? new Error(`systemd-analyze cannot run (${result.error.message}): apt-get install -y systemd`) : undefined);
      assert.equal(result.status, 0, result.stderr);
      assert.equal(result.stderr + result.stdout, '', 'no warning either (an unknown key is only a warning)');
    });

    if (file === 'plantstore.service') {
      it('has the exposure level systemd-analyze security gives it that docs/deploy/README.md states', { skip: skipWithout(systemdAnalyze()) }, () => {
        const analyze = located(systemdAnalyze());
        const result = spawnSync(analyze, ['security', '--offline=yes', unit], { encoding: 'utf8', timeout: 60_000 });
        assert.ifError(result.error ? new Error(`systemd-analyze cannot run (${result.error.message}): apt-get install -y systemd`) : undefined);
        const measured = /Overall exposure level for \S+: (\d+\.\d) (\w+)/.exec(result.stdout);
        assert.ok(measured, `systemd-analyze security printed an overall exposure level: ${result.stdout.slice(-300)}${result.stderr}`);
        const guide = fs.readFileSync(path.join(DEPLOY, 'README.md'), 'utf8');
        const stated = /`systemd-analyze security` rates it (\d+\.\d), "(\w+)"/.exec(guide);
        assert.ok(stated, 'docs/deploy/README.md says `systemd-analyze security` rates it N.N, "LEVEL"');
        assert.deepEqual([stated[1], stated[2]], [measured[1], measured[2]], `docs/deploy/README.md should say ${measured[1]}, "${measured[2]}"`);
      });
    }

    it('runs the installed command as a dedicated user, sandboxed, restarted on failure', () => {
      assert.equal(value(unit, 'Service', 'ExecStart'), `${installedCommand} serve`);
      const user = value(unit, 'Service', 'User');
      assert.ok(user && user !== 'root', `a dedicated user, not ${user}`);
      assert.equal(value(unit, 'Service', 'NoNewPrivileges'), 'yes');
      assert.equal(value(unit, 'Service', 'ProtectSystem'), 'strict');
      assert.equal(value(unit, 'Service', 'PrivateTmp'), 'yes');
      assert.equal(value(unit, 'Service', 'Restart'), 'on-failure');
      // The CLI's `#!/usr/bin/env node` finds a supported Node.js first, not the system's.
      const pathSetting = directives(unit, 'Service').find(([key, v]) => key === 'Environment' && v.startsWith('PATH='))?.[1];
      assert.match(pathSetting ?? '', /^PATH=\/opt\/node\d+\/node_modules\/node\/bin:/);
      if (file === 'plantstore.service') {
        assert.equal(value(unit, 'Service', 'StateDirectory'), 'plantstore');
        assert.match(value(unit, 'Service', 'WorkingDirectory') ?? '', /^\/var\/lib\/plantstore$/);
        assert.ok(directives(unit, 'Service').some(([key, v]) => key === 'Environment' && v === 'DATABASE_URL=sqlite:/var/lib/plantstore/plantstore.db'));
      }
    });

    it('reloads with SIGHUP (systemctl reload, as docs/deploying.md recommends for a renewed certificate), and believes the proxy on loopback', () => {
      assert.equal(value(unit, 'Service', 'ExecReload'), 'kill -HUP $MAINPID');
      const trusted = directives(unit, 'Service').find(([key, v]) => key === 'Environment' && v.startsWith('TRUST_PROXY='))?.[1];
      assert.equal(trusted, 'TRUST_PROXY=loopback', 'behind nginx.conf on the same machine, clients are not all 127.0.0.1');
    });

    it("stops with SIGTERM and gives the server's shutdown (SHUTDOWN_TIMEOUT_MS) time before any SIGKILL", () => {
      assert.equal(value(unit, 'Service', 'KillSignal') ?? 'SIGTERM', 'SIGTERM');
      const shutdown = directives(unit, 'Service').find(([key, v]) => key === 'Environment' && v.startsWith('SHUTDOWN_TIMEOUT_MS='))?.[1];
      const shutdownSeconds = Number(shutdown?.split('=')[1] ?? 10_000) / 1000;
      const stopSeconds = seconds(value(unit, 'Service', 'TimeoutStopSec') ?? '90');
      assert.ok(stopSeconds > shutdownSeconds, `TimeoutStopSec ${stopSeconds} s above SHUTDOWN_TIMEOUT_MS ${shutdownSeconds} s`);
    });
  });
}
