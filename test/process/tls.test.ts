/**
 * HTTPS in `plantstore serve`: real processes, since what is tested is what a TLS client sees on the wire (the
 * certificate chain, a certificate replaced by SIGHUP under a live keep-alive connection), and how the process starts,
 * refuses to start, and logs. Certificates are made at test time (helpers/certificates.ts, with openssl).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpsRequest, type RequestOptions } from 'node:https';
import { connect, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import {
  issueServerCertificate,
  makeCertificateAuthority,
  replaceFile,
  type CertificateAuthority,
  type ServerCertificate,
} from '../helpers/certificates.js';
import { sqliteDatabase, type TestDatabase } from '../helpers/databases.js';
import { CLI, createToken, errorRecordProblem, freePort, rawRequest, startServer, type ServerProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/wait.js';

interface HttpsAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** The server certificate's fingerprint, as this connection saw it. */
  readonly fingerprint256: string;
  readonly socket: TLSSocket;
  /** The request went over a connection an earlier request had opened (keep-alive). */
  readonly reusedSocket: boolean;
}

/** One request with node:https, trusting the test root alone; a new connection unless `agent` keeps one alive. */
function httpsCall(url: string, options: RequestOptions & { body?: string }): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const { body, ...requestOptions } = options;
    const request = httpsRequest(url, { agent: false, ...requestOptions }, (response) => {
      const socket = response.socket as TLSSocket;
      const fingerprint256 = socket.getPeerCertificate().fingerprint256;
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text, fingerprint256, socket, reusedSocket: request.reusedSocket }),
      );
      response.on('error', reject);
    });
    request.setTimeout(10_000, () => request.destroy(new Error(`no answer from ${url} within 10 s`)));
    request.on('error', reject);
    request.end(body);
  });
}

function curl(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync('curl', ['--silent', '--show-error', '--max-time', '10', ...args], { encoding: 'utf8' });
  if (result.error && (result.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error('the TLS tests need curl (apt-get install curl)');
  }
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The server's log lines, parsed. */
function logLines(server: ServerProcess): Array<Record<string, unknown>> {
  return server
    .output()
    .stdout.split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

function linesWith(server: ServerProcess, message: RegExp): Array<Record<string, unknown>> {
  return logLines(server).filter((line) => message.test(String(line.msg)));
}

describe('plantstore serve over TLS', () => {
  let dir: string;
  let db: TestDatabase;
  let ca: CertificateAuthority;
  let first: ServerCertificate;
  let certFile: string;
  let keyFile: string;
  let token: string;
  let server: ServerProcess;
  /** Holds one keep-alive connection, opened before any rotation. */
  let keepAlive: Agent;
  const HEADERS_TIMEOUT_MS = 1000;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-tls-'));
    ca = makeCertificateAuthority(dir);
    first = issueServerCertificate(ca, 'first');
    certFile = path.join(dir, 'server-chain.pem');
    keyFile = path.join(dir, 'server.key');
    replaceFile(certFile, first.chain, 0o644);
    replaceFile(keyFile, first.key);
    db = await sqliteDatabase();
    token = createToken('tls', { DATABASE_URL: db.url });
    server = await startServer(
      {
        DATABASE_URL: db.url,
        TLS_CERT_FILE: certFile,
        TLS_KEY_FILE: keyFile,
        LOG_LEVEL: 'info',
        KEEP_ALIVE_TIMEOUT_MS: '60000',
        HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        MAX_HEADER_BYTES: '2048',
      },
      { ca: ca.root },
    );
    keepAlive = new Agent({ keepAlive: true, maxSockets: 1, ca: ca.root });
  });
  after(async () => {
    keepAlive?.destroy();
    await server?.kill();
    await db?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves the API over HTTPS to curl --cacert and to node:https, sending the chain, ids exact', async () => {
    const id = '9007199254740993';
    const created = curl([
      '--cacert', ca.rootFile,
      '--header', `Authorization: Bearer ${token}`,
      '--header', 'Content-Type: application/json',
      '--data', `{"id":${id},"name":"Fern","tag":"tls"}`,
      '--write-out', '\n%{http_code}',
      `https://localhost:${server.port}/plants`,
    ]);
    assert.equal(created.status, 0, created.stderr);
    assert.equal(created.stdout, '{"name":"Fern","tag":"tls"}\n200');

    // The client trusts the root only: the handshake succeeds because the server sends the intermediate too.
    const read = await httpsCall(`${server.base}/plants/${id}`, { ca: ca.root, headers: { authorization: `Bearer ${token}` } });
    assert.equal(read.status, 200);
    assert.equal(read.body, `{"id":${id},"name":"Fern","tag":"tls"}`);
    assert.equal(read.fingerprint256, first.fingerprint256);

    const untrusting = curl([`https://localhost:${server.port}/healthz`]);
    assert.equal(untrusting.status, 60, `curl without the CA refuses the certificate: ${untrusting.stderr}`);

    assert.equal(linesWith(server, /^serving HTTPS only$/).length, 1, server.output().stdout);
    assert.deepEqual(linesWith(server, /in clear/), []);
  });

  it('serves HTTPS only: a plain HTTP request on the port gets no HTTP answer', async () => {
    const answer = await rawRequest(server.port, { parts: ['GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'], timeoutMs: 10_000 });
    assert.equal(answer.closedWithoutAnswer, true, `answered in clear: ${answer.status} ${answer.body}`);
    assert.ok(!/^HTTP\//.test(answer.body), answer.body);
  });

  it('keeps the HTTP limits over TLS: a header block over MAX_HEADER_BYTES gets a 431 Error record', async () => {
    const answer = await httpsCall(`${server.base}/healthz`, { ca: ca.root, headers: { 'x-padding': 'a'.repeat(4096) } });
    assert.equal(answer.status, 431);
    assert.equal(errorRecordProblem(431, answer.headers['content-type'] as string | undefined, answer.body), undefined);
  });

  it('cuts off a connection that never starts its handshake after HEADERS_TIMEOUT_MS, not Node\'s 120 s', async () => {
    const started = performance.now();
    const socket: Socket = connect(server.port, '127.0.0.1');
    socket.on('error', () => undefined);
    try {
      await once(socket, 'close', { signal: AbortSignal.timeout(HEADERS_TIMEOUT_MS + 5000) });
    } finally {
      socket.destroy();
    }
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= HEADERS_TIMEOUT_MS - 100 && elapsed < HEADERS_TIMEOUT_MS + 4000, `closed after ${Math.round(elapsed)} ms`);
  });

  it('SIGHUP: new connections get the renewed certificate while a keep-alive connection opened before keeps working', async () => {
    const before = await httpsCall(`${server.base}/healthz`, { agent: keepAlive });
    assert.equal(before.status, 200);
    assert.equal(before.fingerprint256, first.fingerprint256);

    const renewed = issueServerCertificate(ca, 'renewed');
    assert.notEqual(renewed.fingerprint256, first.fingerprint256);
    replaceFile(keyFile, renewed.key);
    replaceFile(certFile, renewed.chain, 0o644);
    server.child.kill('SIGHUP');
    await waitFor('the reload to be logged', () =>
      linesWith(server, /^TLS certificate reloaded/).some((line) => (line.certificate as { fingerprint256?: string }).fingerprint256 === renewed.fingerprint256),
    );

    const fresh = await httpsCall(`${server.base}/healthz`, { ca: ca.root });
    assert.equal(fresh.status, 200);
    assert.equal(fresh.fingerprint256, renewed.fingerprint256, 'a new connection is served the new certificate');

    const old = await httpsCall(`${server.base}/plants/9007199254740993`, { agent: keepAlive, headers: { authorization: `Bearer ${token}` } });
    assert.equal(old.status, 200);
    assert.equal(old.reusedSocket, true, 'the request went over the connection opened before the reload');
    assert.equal(old.socket, before.socket);
    assert.equal(old.fingerprint256, first.fingerprint256, 'that connection keeps the certificate it was opened with');
    assert.equal(server.exited(), false);
  });

  it('SIGHUP with a pair that cannot be used logs an error naming the problem and keeps serving the previous certificate', async () => {
    const served = (await httpsCall(`${server.base}/healthz`, { ca: ca.root })).fingerprint256;
    const other = issueServerCertificate(ca, 'other');
    const cases: Array<{ what: string; write: () => void; problem: RegExp }> = [
      {
        what: 'a key that is not the certificate\'s',
        write: () => replaceFile(keyFile, other.key),
        problem: new RegExp(`TLS_KEY_FILE ${keyFile} is not the key of the certificate in TLS_CERT_FILE ${certFile}`),
      },
      {
        what: 'a certificate file that is not PEM',
        write: () => replaceFile(certFile, 'not a certificate\n', 0o644),
        problem: new RegExp(`TLS_CERT_FILE ${certFile} holds no PEM certificate`),
      },
      {
        // A writer that never comes: opening it would wait for ever, and a reload that waits keeps every later one waiting.
        what: 'a named pipe (FIFO) as the certificate file',
        write: () => {
          rmSync(certFile);
          assert.equal(spawnSync('mkfifo', [certFile]).status, 0);
        },
        problem: new RegExp(`TLS_CERT_FILE ${certFile} is not a regular file: it is a named pipe \\(FIFO\\)`),
      },
      {
        what: 'a directory as the key file',
        write: () => {
          rmSync(keyFile);
          mkdirSync(keyFile, { mode: 0o700 });
        },
        problem: new RegExp(`TLS_KEY_FILE ${keyFile} is not a regular file: it is a directory`),
      },
      {
        what: 'a key readable by others',
        write: () => {
          rmSync(certFile);
          rmSync(keyFile, { recursive: true });
          replaceFile(certFile, other.chain, 0o644);
          replaceFile(keyFile, other.key, 0o644);
        },
        problem: new RegExp(`TLS_KEY_FILE ${keyFile}: permissions 0644 are too open`),
      },
      {
        what: 'a missing key file',
        write: () => rmSync(keyFile),
        problem: new RegExp(`cannot read TLS_KEY_FILE ${keyFile}: ENOENT`),
      },
    ];
    for (const { what, write, problem } of cases) {
      const errorsBefore = linesWith(server, /^TLS certificate not reloaded/).length;
      write();
      server.child.kill('SIGHUP');
      await waitFor(`the refused reload (${what}) to be logged`, () => linesWith(server, /^TLS certificate not reloaded/).length > errorsBefore);
      const refused = linesWith(server, /^TLS certificate not reloaded/).slice(errorsBefore);
      assert.equal(refused.length, 1, what);
      assert.equal(refused[0]?.level, 50, `${what}: logged at error`);
      assert.match(String(refused[0]?.msg), problem, what);
      const fresh = await httpsCall(`${server.base}/healthz`, { ca: ca.root });
      assert.equal(fresh.status, 200, what);
      assert.equal(fresh.fingerprint256, served, `${what}: new connections still get the previous certificate`);
    }
    assert.equal(server.exited(), false);
    // The keep-alive connection survived every reload too.
    const old = await httpsCall(`${server.base}/healthz`, { agent: keepAlive });
    assert.equal(old.reusedSocket, true);
    assert.equal(old.status, 200);
  });

  it('stops on SIGTERM with exit 0, not kept waiting by a connection that never finishes its handshake', async () => {
    keepAlive.destroy();
    const silent = connect(server.port, '127.0.0.1');
    silent.on('error', () => undefined);
    await once(silent, 'connect');
    const started = performance.now();
    // SHUTDOWN_TIMEOUT_MS is 10 s: a shutdown waiting on the handshake for Node's 120 s would exit 1 then.
    assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null }, server.output().stderr);
    const elapsed = performance.now() - started;
    assert.ok(elapsed < HEADERS_TIMEOUT_MS + 4000, `exited ${Math.round(elapsed)} ms after SIGTERM`);
    silent.destroy();
  });
});

describe('the TLS policy of plantstore serve', () => {
  let dir: string;
  let db: TestDatabase;
  let ca: CertificateAuthority;
  let env: Record<string, string>;
  let server: ServerProcess;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-tls-policy-'));
    ca = makeCertificateAuthority(dir);
    // RSA: the suites without forward secrecy exchange keys with the certificate's RSA key, so only with one can they be offered.
    const rsa = issueServerCertificate(ca, 'rsa', 'rsa');
    const certFile = path.join(dir, 'server-chain.pem');
    const keyFile = path.join(dir, 'server.key');
    replaceFile(certFile, rsa.chain, 0o644);
    replaceFile(keyFile, rsa.key);
    db = await sqliteDatabase();
    env = { DATABASE_URL: db.url, TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile };
    server = await startServer(env, { ca: ca.root });
  });
  after(async () => {
    await server?.kill();
    await db?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** `openssl s_client` to `port` with `args`, sending nothing: what it printed and how it ended. */
  const sClient = (port: number, args: readonly string[]) =>
    spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-CAfile', ca.rootFile, ...args], { input: '', encoding: 'utf8', timeout: 10_000 });

  it('serves TLS 1.2 only with ECDHE and an AEAD suite, and TLS 1.3: openssl s_client -tls1_2 -cipher AES128-SHA cannot connect', () => {
    // Static-RSA key exchange (no forward secrecy) with CBC and with GCM, and ECDHE with CBC: Node's defaults served all.
    for (const cipher of ['AES128-SHA', 'AES256-SHA', 'AES256-GCM-SHA384', 'ECDHE-RSA-AES128-SHA']) {
      const refused = sClient(server.port, ['-tls1_2', '-cipher', cipher]);
      assert.notEqual(refused.status, 0, `${cipher} was accepted: ${refused.stdout}`);
      assert.match(refused.stdout, /Cipher is \(NONE\)/, cipher);
    }
    for (const args of [['-tls1_2', '-cipher', 'ECDHE-RSA-AES128-GCM-SHA256'], ['-tls1_2', '-cipher', 'ECDHE-RSA-CHACHA20-POLY1305'], ['-tls1_3']]) {
      const accepted = sClient(server.port, args);
      assert.equal(accepted.status, 0, `${args.join(' ')}: ${accepted.stderr}`);
      assert.match(accepted.stdout, /New, TLSv1\.[23], Cipher is (ECDHE-RSA-|TLS_)/, args.join(' '));
    }
    assert.notEqual(sClient(server.port, ['-tls1_1']).status, 0, 'TLS 1.1 was accepted');
  });

  it('refuses a renegotiation a client starts on a TLS 1.2 connection', async () => {
    const socket = tlsConnect({ host: '127.0.0.1', port: server.port, ca: ca.root, servername: 'localhost', maxVersion: 'TLSv1.2' });
    socket.on('error', () => undefined);
    await once(socket, 'secureConnect');
    const outcome = await new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('no outcome within 5 s'), 5000);
      const settle = (what: string) => {
        clearTimeout(timer);
        resolve(what);
      };
      socket.once('error', (error) => settle(`refused: ${error.message}`));
      socket.once('close', () => settle('closed'));
      if (!socket.renegotiate({ rejectUnauthorized: true }, (error) => settle(error ? `refused: ${error.message}` : 'renegotiated'))) settle('not started');
    });
    socket.destroy();
    assert.match(outcome, /^refused: .*no renegotiation/);
  });

  it('serves what TLS_CIPHERS and TLS_MIN_VERSION say instead, for operators who must', async () => {
    const widened = await startServer({ ...env, TLS_CIPHERS: 'AES128-SHA', TLS_MIN_VERSION: 'TLSv1.3' }, { ca: ca.root });
    try {
      assert.notEqual(sClient(widened.port, ['-tls1_2', '-cipher', 'AES128-SHA']).status, 0, 'TLS 1.2 served under TLS_MIN_VERSION=TLSv1.3');
      assert.equal(sClient(widened.port, ['-tls1_3']).status, 0);
    } finally {
      await widened.kill();
    }
    const legacy = await startServer({ ...env, TLS_CIPHERS: 'AES128-SHA' }, { ca: ca.root });
    try {
      const accepted = sClient(legacy.port, ['-tls1_2', '-cipher', 'AES128-SHA']);
      assert.equal(accepted.status, 0, accepted.stderr);
      assert.match(accepted.stdout, /Cipher is AES128-SHA/);
    } finally {
      await legacy.kill();
    }
  });
});

describe('plantstore serve over TLS with WORKERS=2', () => {
  let dir: string;
  let db: TestDatabase;
  let ca: CertificateAuthority;
  let certFile: string;
  let keyFile: string;
  let server: ServerProcess;
  /** Fresh connections per check: the kernel spreads them over both threads (the main thread and a worker) by their source ports. */
  const CONNECTIONS = 24;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-tls-workers-'));
    ca = makeCertificateAuthority(dir);
    const first = issueServerCertificate(ca, 'first');
    certFile = path.join(dir, 'server-chain.pem');
    keyFile = path.join(dir, 'server.key');
    replaceFile(certFile, first.chain, 0o644);
    replaceFile(keyFile, first.key);
    db = await sqliteDatabase();
    // debug: each worker logs its requests, with its number, so the test sees that both answered.
    server = await startServer({ DATABASE_URL: db.url, TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile, LOG_LEVEL: 'debug', WORKERS: '2' }, { ca: ca.root });
    await waitFor('every worker to listen', () => linesWith(server, /^every worker thread listens$/).length === 1);
  });
  after(async () => {
    await server?.kill();
    await db?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The main thread's log lines carry no worker number; a worker thread's carry its slot. */
  const threadOf = (worker: unknown) => (worker === undefined ? 'main' : `worker ${String(worker)}`);

  /** The fingerprints CONNECTIONS new connections were served, and which threads answered them. */
  async function freshConnections(): Promise<{ fingerprints: Set<string>; workers: Set<unknown> }> {
    const seen = logLines(server).length;
    const answers = await Promise.all(Array.from({ length: CONNECTIONS }, () => httpsCall(`${server.base}/healthz`, { ca: ca.root })));
    for (const answer of answers) assert.equal(answer.status, 200);
    await waitFor('every request to be logged', () =>
      logLines(server).slice(seen).filter((line) => line.msg === 'request completed').length >= CONNECTIONS,
    );
    const workers = new Set(logLines(server).slice(seen).filter((line) => line.msg === 'request completed').map((line) => line.worker));
    return { fingerprints: new Set(answers.map((answer) => answer.fingerprint256)), workers };
  }

  it('SIGHUP reaches every thread: after one reload, logged once, every new connection gets the renewed certificate', async () => {
    assert.equal(linesWith(server, /^serving HTTPS only$/).length, 1, 'the instance says once what it serves');
    const before = await freshConnections();
    assert.deepEqual([...before.workers].map(threadOf).sort(), ['main', 'worker 1'], 'both threads answered');
    assert.equal(before.fingerprints.size, 1);

    const renewed = issueServerCertificate(ca, 'renewed-workers');
    replaceFile(keyFile, renewed.key);
    replaceFile(certFile, renewed.chain, 0o644);
    server.child.kill('SIGHUP');
    await waitFor('the reload to be logged', () => linesWith(server, /^TLS certificate reloaded/).length === 1);
    const reloaded = linesWith(server, /^TLS certificate reloaded/)[0] as { certificate: { fingerprint256: string } };
    assert.equal(reloaded.certificate.fingerprint256, renewed.fingerprint256);

    const after = await freshConnections();
    assert.deepEqual([...after.workers].map(threadOf).sort(), ['main', 'worker 1'], 'both threads answered');
    assert.deepEqual([...after.fingerprints], [renewed.fingerprint256], 'every thread serves the renewed certificate');
    assert.equal(server.exited(), false);
    assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null }, server.output().stderr);
  });
});

describe('plantstore serve without TLS', () => {
  let db: TestDatabase;
  before(async () => {
    db = await sqliteDatabase();
  });
  after(() => db?.cleanup());

  it('logs that a SIGHUP has nothing to reload, and keeps serving', async () => {
    const server = await startServer({ DATABASE_URL: db.url, LOG_LEVEL: 'info' });
    try {
      server.child.kill('SIGHUP');
      await waitFor('the SIGHUP to be logged', () => linesWith(server, /nothing to reload/).length === 1);
      const response = await fetch(`${server.base}/healthz`);
      assert.equal(response.status, 200);
      assert.equal(server.exited(), false);
      assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null });
    } finally {
      await server.kill();
    }
  });
});

describe('the warning about tokens crossing the network in clear', () => {
  let dir: string;
  let db: TestDatabase;
  let ca: CertificateAuthority;
  let tlsEnv: Record<string, string>;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-tls-'));
    ca = makeCertificateAuthority(dir);
    const certificate = issueServerCertificate(ca, 'server');
    tlsEnv = { TLS_CERT_FILE: path.join(dir, 'server-chain.pem'), TLS_KEY_FILE: path.join(dir, 'server.key') };
    replaceFile(tlsEnv.TLS_CERT_FILE as string, certificate.chain, 0o644);
    replaceFile(tlsEnv.TLS_KEY_FILE as string, certificate.key);
    db = await sqliteDatabase();
  });
  after(async () => {
    await db?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The cleartext warnings a server started so logs, read once it has shut down (so every line is in). */
  async function cleartextWarnings(host: string, env: Record<string, string>, secure: boolean) {
    const server = await startServer({ DATABASE_URL: db.url, LOG_LEVEL: 'info', ...env }, { host, ...(secure ? { ca: ca.root } : {}) });
    try {
      assert.deepEqual(await server.stop('SIGTERM'), { code: 0, signal: null });
      await waitFor('the last log line', () => linesWith(server, /^shut down cleanly$/).length === 1);
      return { warnings: linesWith(server, /in clear/), lines: logLines(server) };
    } finally {
      await server.kill();
    }
  }

  it('is logged once, at warn, when plain HTTP listens on a non-loopback address', async () => {
    const { warnings, lines } = await cleartextWarnings('0.0.0.0', {}, false);
    assert.equal(warnings.length, 1, JSON.stringify(lines));
    assert.equal(warnings[0]?.level, 40);
    assert.match(String(warnings[0]?.msg), /bearer tokens will cross the network in clear unless a TLS proxy is in front/);
    assert.deepEqual((warnings[0]?.addresses as string[]).map((address) => address.split(':')[0]), ['0.0.0.0']);
  });

  it('is not logged on loopback', async () => {
    const { warnings, lines } = await cleartextWarnings('127.0.0.1', {}, false);
    assert.deepEqual(warnings, []);
    assert.ok(lines.some((line) => /^Server listening at http:/.test(String(line.msg))), JSON.stringify(lines));
  });

  it('is not logged when TLS is on, on any address', async () => {
    const { warnings, lines } = await cleartextWarnings('0.0.0.0', tlsEnv, true);
    assert.deepEqual(warnings, []);
    assert.ok(lines.some((line) => line.msg === 'serving HTTPS only'), JSON.stringify(lines));
  });
});

describe('plantstore serve refusing to start with TLS files it cannot use', () => {
  let dir: string;
  let db: TestDatabase;
  let ca: CertificateAuthority;
  let certificate: ServerCertificate;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-tls-'));
    ca = makeCertificateAuthority(dir);
    certificate = issueServerCertificate(ca, 'server');
    db = await sqliteDatabase();
  });
  after(async () => {
    await db?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** `plantstore serve` with `env`, run until it exits by itself (killed after 20 s: a server that started). */
  async function serve(env: Record<string, string>) {
    const result = spawnSync(process.execPath, [CLI, 'serve'], {
      env: { ...process.env, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: String(await freePort()), LOG_LEVEL: 'warn', ...env },
      encoding: 'utf8',
      timeout: 20_000,
    });
    return { code: result.status, signal: result.signal, stderr: result.stderr };
  }

  /** A certificate and key file in a folder of their own, the key with `keyMode`. */
  function files(name: string, cert: Buffer | string, key: Buffer | string, keyMode = 0o600) {
    const certFile = path.join(dir, `${name}.chain.pem`);
    const keyFile = path.join(dir, `${name}.key.pem`);
    writeFileSync(certFile, cert);
    writeFileSync(keyFile, key);
    chmodSync(keyFile, keyMode);
    return { TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile };
  }

  // Every mode and every way a file can be wrong is checked in-process (tls-files.test.ts); here, that the process refuses.
  for (const mode of [0o644, 0o640]) {
    const octal = mode.toString(8).padStart(4, '0');
    it(`refuses a key file with mode ${octal}, naming the file and its mode, exit 1`, async () => {
      const env = files(`mode-${octal}`, certificate.chain, certificate.key, mode);
      const ended = await serve(env);
      assert.deepEqual({ code: ended.code, signal: ended.signal }, { code: 1, signal: null }, ended.stderr);
      assert.equal(
        ended.stderr.trim(),
        `plantstore: TLS_KEY_FILE ${env.TLS_KEY_FILE}: permissions ${octal} are too open; a private key must not be accessible by group or others (chmod 600 ${env.TLS_KEY_FILE})`,
      );
    });
  }

  const other = () => issueServerCertificate(ca, 'unrelated');
  const unusable: Array<{ what: string; env: () => Record<string, string>; stderr: (env: Record<string, string>) => RegExp }> = [
    {
      what: 'a certificate file that is not PEM',
      env: () => files('garbage-cert', 'hello\n', certificate.key),
      stderr: (env) => new RegExp(`^plantstore: TLS_CERT_FILE ${env.TLS_CERT_FILE} holds no PEM certificate`),
    },
    {
      what: 'a key that is not the certificate\'s',
      env: () => files('mismatch', certificate.chain, other().key),
      stderr: (env) => new RegExp(`^plantstore: TLS_KEY_FILE ${env.TLS_KEY_FILE} is not the key of the certificate in TLS_CERT_FILE ${env.TLS_CERT_FILE}`),
    },
    {
      what: 'a missing certificate file',
      env: () => ({ ...files('missing-cert', certificate.chain, certificate.key), TLS_CERT_FILE: path.join(dir, 'nowhere.pem') }),
      stderr: (env) => new RegExp(`^plantstore: cannot read TLS_CERT_FILE ${env.TLS_CERT_FILE}: ENOENT`),
    },
  ];
  for (const { what, env, stderr } of unusable) {
    it(`fails to start on ${what}, naming the file, exit 1`, async () => {
      const given = env();
      const ended = await serve(given);
      assert.deepEqual({ code: ended.code, signal: ended.signal }, { code: 1, signal: null }, ended.stderr);
      assert.match(ended.stderr, stderr(given));
    });
  }

  for (const [set, missing] of [
    ['TLS_CERT_FILE', 'TLS_KEY_FILE'],
    ['TLS_KEY_FILE', 'TLS_CERT_FILE'],
  ] as const) {
    it(`is a configuration error (exit 2) to set ${set} without ${missing}, naming both`, async () => {
      const ended = await serve({ [set]: path.join(dir, 'whatever.pem') });
      assert.deepEqual({ code: ended.code, signal: ended.signal }, { code: 2, signal: null }, ended.stderr);
      assert.equal(
        ended.stderr.trim(),
        `plantstore: invalid configuration: ${missing}: is not set but ${set} is: set both TLS_CERT_FILE and TLS_KEY_FILE to serve HTTPS, or neither`,
      );
    });
  }
});
