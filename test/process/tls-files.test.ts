/**
 * readTlsCredentials: what TLS_CERT_FILE and TLS_KEY_FILE must hold, checked in-process for every way they can be
 * wrong (tls.test.ts runs `plantstore serve` on a few of them, to see the process refuse to start).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { certificateReloader, DEFAULT_TLS_POLICY, readTlsCredentials as readWithPolicy, TLS_FILE_MAX_BYTES, TlsFileError, type TlsCredentials } from '../../src/http/tls.js';
import { issueServerCertificate, makeCertificateAuthority, type CertificateAuthority, type ServerCertificate } from '../helpers/certificates.js';

/** The files under the default policy (TLS_MIN_VERSION, TLS_CIPHERS unset). */
const readTlsCredentials = (files: { certFile: string; keyFile: string }) => readWithPolicy({ ...files, policy: DEFAULT_TLS_POLICY });

describe('reading the TLS certificate and key', () => {
  let dir: string;
  let ca: CertificateAuthority;
  let server: ServerCertificate;
  let other: ServerCertificate;
  let count = 0;

  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'plantstore-tls-files-'));
    ca = makeCertificateAuthority(dir);
    server = issueServerCertificate(ca, 'server');
    other = issueServerCertificate(ca, 'other');
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A certificate file and a key file of their own, the key with `keyMode`. */
  function files(cert: Buffer | string, key: Buffer | string, keyMode = 0o600) {
    count += 1;
    const certFile = path.join(dir, `${count}.chain.pem`);
    const keyFile = path.join(dir, `${count}.key.pem`);
    writeFileSync(certFile, cert);
    writeFileSync(keyFile, key);
    chmodSync(keyFile, keyMode);
    return { certFile, keyFile };
  }

  async function refusal(given: { certFile: string; keyFile: string }): Promise<string> {
    const error = await readTlsCredentials(given).then(
      () => assert.fail('the files were accepted'),
      (error: unknown) => error,
    );
    assert.ok(error instanceof TlsFileError, String(error));
    return error.message;
  }

  it('accepts a chain and its key, and reports the server certificate (the first in the file)', async () => {
    const given = files(server.chain, server.key);
    const credentials = await readTlsCredentials(given);
    assert.deepEqual(credentials.cert, server.chain);
    assert.deepEqual(credentials.key, server.key);
    assert.equal(credentials.certificate.fingerprint256, server.fingerprint256);
    assert.equal(credentials.certificate.subject, 'CN=localhost, O=server');
    assert.ok(credentials.certificate.validTo.getTime() > Date.now());
  });

  for (const mode of [0o600, 0o400, 0o700]) {
    it(`accepts a key file of mode ${mode.toString(8).padStart(4, '0')}`, async () => {
      await readTlsCredentials(files(server.chain, server.key, mode));
    });
  }

  for (const mode of [0o644, 0o640, 0o604, 0o660, 0o620, 0o602, 0o610, 0o601, 0o666]) {
    const octal = mode.toString(8).padStart(4, '0');
    it(`refuses a key file of mode ${octal}, naming the file and the mode, as OpenSSH does`, async () => {
      const given = files(server.chain, server.key, mode);
      assert.equal(
        await refusal(given),
        `TLS_KEY_FILE ${given.keyFile}: permissions ${octal} are too open; a private key must not be accessible by group or others (chmod 600 ${given.keyFile})`,
      );
    });
  }

  it('judges a symbolic link by the mode of the key it leads to (certbot\'s live/ links)', async () => {
    const given = files(server.chain, server.key, 0o644);
    const link = path.join(dir, 'linked.key.pem');
    symlinkSync(given.keyFile, link);
    assert.match(await refusal({ certFile: given.certFile, keyFile: link }), /permissions 0644 are too open/);
    chmodSync(given.keyFile, 0o600);
    await readTlsCredentials({ certFile: given.certFile, keyFile: link });
  });

  it('refuses a key that is not the certificate\'s, and a chain in the wrong order, naming both files', async () => {
    const mismatched = files(server.chain, other.key);
    assert.equal(
      await refusal(mismatched),
      `TLS_KEY_FILE ${mismatched.keyFile} is not the key of the certificate in TLS_CERT_FILE ${mismatched.certFile} ` +
        '(the file must start with the server\'s own certificate, followed by its chain)',
    );
    const intermediate = readFileSync(path.join(ca.dir, 'intermediate.pem'));
    const leaf = server.chain.subarray(0, server.chain.length - intermediate.length);
    assert.match(await refusal(files(Buffer.concat([intermediate, leaf]), server.key)), /is not the key of the certificate/);
  });

  it('refuses an encrypted key: an unattended restart has no one to type its passphrase', async () => {
    const encrypted = createPrivateKey(server.key).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }).toString();
    assert.match(encrypted, /^-----BEGIN ENCRYPTED PRIVATE KEY-----/);
    const given = files(server.chain, encrypted);
    assert.match(await refusal(given), new RegExp(`^TLS_KEY_FILE ${given.keyFile} is not a usable unencrypted PEM private key: `));
  });

  const unusable: Array<{ what: string; given: () => { certFile: string; keyFile: string }; message: (given: { certFile: string; keyFile: string }) => RegExp }> = [
    { what: 'an empty certificate file', given: () => files('', server.key), message: (g) => new RegExp(`^TLS_CERT_FILE ${g.certFile} holds no PEM certificate`) },
    { what: 'a certificate file holding a key', given: () => files(server.key, server.key), message: (g) => new RegExp(`^TLS_CERT_FILE ${g.certFile} holds no PEM certificate`) },
    {
      what: 'a damaged certificate',
      given: () => files(server.chain.toString('latin1').replace(/(-----BEGIN CERTIFICATE-----\n)..../, '$1AAAA'), server.key),
      message: (g) => new RegExp(`^TLS_CERT_FILE ${g.certFile} is not a valid PEM certificate: `),
    },
    { what: 'an empty key file', given: () => files(server.chain, ''), message: (g) => new RegExp(`^TLS_KEY_FILE ${g.keyFile} holds no PEM private key`) },
    {
      what: 'a damaged key',
      given: () => files(server.chain, server.key.toString('latin1').replace(/(PRIVATE KEY-----\n)..../, '$1AAAA')),
      message: (g) => new RegExp(`^TLS_KEY_FILE ${g.keyFile} is not a usable unencrypted PEM private key: `),
    },
    { what: 'a missing key file', given: () => ({ certFile: files(server.chain, server.key).certFile, keyFile: path.join(dir, 'absent.key') }), message: (g) => new RegExp(`^cannot read TLS_KEY_FILE ${g.keyFile}: ENOENT`) },
    { what: 'a missing certificate file', given: () => ({ certFile: path.join(dir, 'absent.pem'), keyFile: files(server.chain, server.key).keyFile }), message: (g) => new RegExp(`^cannot read TLS_CERT_FILE ${g.certFile}: ENOENT`) },
    {
      what: 'a folder as the key',
      given: () => {
        const folder = path.join(dir, 'a-folder');
        mkdirSync(folder, { recursive: true, mode: 0o700 });
        return { certFile: files(server.chain, server.key).certFile, keyFile: folder };
      },
      message: (g) => new RegExp(`^TLS_KEY_FILE ${g.keyFile} is not a regular file: it is a directory$`),
    },
    {
      what: 'a named pipe (FIFO) as the certificate, which no one writes to',
      given: () => {
        const fifo = path.join(dir, `${count}.fifo.pem`);
        assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
        return { certFile: fifo, keyFile: files(server.chain, server.key).keyFile };
      },
      message: (g) => new RegExp(`^TLS_CERT_FILE ${g.certFile} is not a regular file: it is a named pipe \\(FIFO\\)$`),
    },
    {
      what: 'a device that never ends as the certificate',
      given: () => ({ certFile: '/dev/zero', keyFile: files(server.chain, server.key).keyFile }),
      message: () => /^TLS_CERT_FILE \/dev\/zero is not a regular file: it is a character device$/,
    },
    {
      what: 'a certificate file larger than any chain',
      given: () => files(Buffer.concat([server.chain, Buffer.alloc(TLS_FILE_MAX_BYTES)]), server.key),
      message: (g) => new RegExp(`^TLS_CERT_FILE ${g.certFile} is ${TLS_FILE_MAX_BYTES + server.chain.length} bytes, more than a certificate or key file can be`),
    },
  ];
  for (const { what, given, message } of unusable) {
    it(`refuses ${what}, naming the file`, async () => {
      const paths = given();
      assert.match(await refusal(paths), message(paths));
    });
  }

  it('gives up on a reload that hangs, logs it, keeps the previous pair, and honours the next one', async () => {
    const given = { ...files(server.chain, server.key), policy: DEFAULT_TLS_POLICY };
    const errors: string[] = [];
    const infos: string[] = [];
    const log = { error: (_: unknown, message: string) => errors.push(message), info: (_: unknown, message: string) => infos.push(message), warn: () => undefined };
    const served: TlsCredentials[] = [];
    let handOvers = 0;
    // The first hand-over never completes, as a worker stuck in a long task would leave it.
    const reload = certificateReloader(log as never, given, (credentials) => (++handOvers === 1 ? new Promise<void>(() => undefined) : void served.push(credentials)), 200);
    const first = reload();
    const second = reload();
    await first;
    assert.deepEqual(errors, ['TLS certificate not reloaded, still serving the previous one: the servers did not take the new certificate within 200 ms']);
    await second;
    assert.equal(served.length, 1, 'the reload after the one that hung was honoured');
    assert.deepEqual(infos, ['TLS certificate reloaded: new connections get it']);
  });
});
