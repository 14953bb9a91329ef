/**
 * Behind a real nginx (issue 37): every connection the server sees comes from the proxy's address, so with
 * TRUST_PROXY what is counted per client, failed authentication here, follows the forwarded address, and the proxy's
 * many connections (it is many clients) are all served. nginx runs with a
 * generated configuration on a free loopback port, proxying to the server as docs/deploy/nginx.conf does (a
 * connection per request here, the worst case for the share), and is stopped in `after`.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Agent, fetch } from 'undici';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { concurrentCreates } from '../helpers/fair-share.js';
import { createToken, freePort, startServer, type ServerProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

const NGINX_CANDIDATES = ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/bin/nginx'];

function nginxConfig(dir: string, port: number, upstreamPort: number): string {
  const temp = (name: string) => path.join(dir, name);
  return `
worker_processes 1;
daemon off;
master_process on;
pid ${temp('nginx.pid')};
error_log ${temp('error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${temp('body')};
  proxy_temp_path ${temp('proxy')};
  fastcgi_temp_path ${temp('fastcgi')};
  uwsgi_temp_path ${temp('uwsgi')};
  scgi_temp_path ${temp('scgi')};
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://127.0.0.1:${upstreamPort};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
  }
}
`;
}

describe('behind nginx with TRUST_PROXY', { timeout: 120_000 }, () => {
  let db: TestDatabase;
  let server: ServerProcess;
  let nginx: ChildProcess | undefined;
  let dir: string;
  let proxied: string;
  let token: string;

  before(async () => {
    const binary = NGINX_CANDIDATES.find((candidate) => fs.existsSync(candidate));
    assert.ok(binary, `nginx is not installed (looked for ${NGINX_CANDIDATES.join(', ')}): apt-get install nginx`);
    db = await sqliteDatabase();
    const env = { DATABASE_URL: db.url, TRUST_PROXY: '127.0.0.1', AUTH_FAILURE_LIMIT: '3' };
    token = createToken('proxied', env);
    server = await startServer(env);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plantstore-nginx-'));
    const port = await freePort();
    fs.writeFileSync(path.join(dir, 'nginx.conf'), nginxConfig(dir, port, server.port));
    const child = spawn(binary, ['-e', path.join(dir, 'error.log'), '-p', dir, '-c', path.join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
    nginx = child;
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    proxied = `http://127.0.0.1:${port}`;
    await waitFor(
      `nginx to proxy /healthz (${stderr})`,
      async () => {
        if (child.exitCode !== null) assert.fail(`nginx exited ${child.exitCode}: ${stderr}`);
        try {
          const response = await fetch(`${proxied}/healthz`);
          await response.arrayBuffer();
          return response.status === 200;
        } catch {
          return false;
        }
      },
      { timeoutMs: 10_000 },
    );
  });

  after(async () => {
    if (nginx && nginx.exitCode === null && nginx.signalCode === null) {
      const exited = once(nginx, 'exit');
      // SIGTERM is nginx's fast shutdown: the master stops its worker and exits.
      nginx.kill('SIGTERM');
      await exited;
    }
    await server?.kill();
    await db?.cleanup();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the proxy’s connections are all served: 200 creates at once through it, from two clients, are all answered 200', async () => {
    const [first, second] = await Promise.all([
      concurrentCreates(proxied, token, { count: 100, localAddress: '127.0.0.2', firstId: 1n }),
      concurrentCreates(proxied, token, { count: 100, localAddress: '127.0.0.3', firstId: 1001n }),
    ]);
    for (const answers of [first, second]) {
      assert.deepEqual(Object.fromEntries(answers.statuses), { 200: 100 }, `every create answered 200: ${answers.unexplained.slice(0, 3).join('; ')}`);
      assert.equal(answers.socketErrors.size, 0);
    }
  });

  it('failed authentication is counted per forwarded client address, not per proxy', async () => {
    const fromClient = async (localAddress: string) => {
      const agent = new Agent({ localAddress });
      try {
        const response = await fetch(`${proxied}/plants/1`, { headers: { authorization: 'Bearer not-a-token' }, dispatcher: agent });
        await response.arrayBuffer();
        return response.status;
      } finally {
        await agent.close();
      }
    };
    const statuses = [];
    for (let attempt = 0; attempt < 4; attempt += 1) statuses.push(await fromClient('127.0.0.5'));
    assert.deepEqual(statuses, [401, 401, 401, 429], 'the fourth failure from one client is refused for its address');
    assert.equal(await fromClient('127.0.0.6'), 401, 'another client behind the same proxy is not');
  });
});
