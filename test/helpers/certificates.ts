import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Certificates made at test time with Debian's openssl (Node's crypto cannot sign an X.509 certificate): a root CA,
 * an intermediate CA it signs, and server certificates the intermediate signs. A client trusts the root alone, so a
 * server is trusted only if it sends the intermediate too: the certificate file holds the chain.
 */
const OPENSSL = 'openssl';

function openssl(args: readonly string[], cwd: string): void {
  const result = spawnSync(OPENSSL, args, { cwd, encoding: 'utf8' });
  if (result.error && (result.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(`the TLS tests need the openssl command to make certificates, and ${OPENSSL} is not installed (apt-get install openssl)`);
  }
  if (result.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${result.stderr}`);
}

export interface CertificateAuthority {
  readonly dir: string;
  /** The root certificate, PEM: what clients are given as their CA (curl --cacert, https's `ca`). */
  readonly rootFile: string;
  readonly root: Buffer;
}

export interface ServerCertificate {
  /** The server's certificate followed by the intermediate's: what TLS_CERT_FILE holds. */
  readonly chain: Buffer;
  /** PEM, unencrypted. */
  readonly key: Buffer;
  /** Of the server's own certificate, as a client's getPeerCertificate() reports it. */
  readonly fingerprint256: string;
}

const KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
/** What a server certificate's key is: EC unless a test needs RSA (the static-RSA suites exist only with one). */
const SERVER_KEYS = { ec: KEY, rsa: ['-newkey', 'rsa:2048', '-nodes'] } as const;

/** A root and an intermediate CA in `dir`. */
export function makeCertificateAuthority(dir: string): CertificateAuthority {
  openssl([
    'req', '-x509', ...KEY, '-keyout', 'root.key', '-out', 'root.pem', '-days', '2', '-subj', '/CN=plantstore test root',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ], dir);
  openssl(['req', '-new', ...KEY, '-keyout', 'intermediate.key', '-out', 'intermediate.csr', '-subj', '/CN=plantstore test intermediate'], dir);
  writeFileSync(path.join(dir, 'intermediate.ext'), 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n');
  openssl([
    'x509', '-req', '-in', 'intermediate.csr', '-CA', 'root.pem', '-CAkey', 'root.key', '-CAcreateserial', '-days', '2',
    '-extfile', 'intermediate.ext', '-out', 'intermediate.pem',
  ], dir);
  const rootFile = path.join(dir, 'root.pem');
  return { dir, rootFile, root: readFileSync(rootFile) };
}

/** A server certificate for localhost and 127.0.0.1, signed by the intermediate, with a key of its own. */
export function issueServerCertificate(ca: CertificateAuthority, name: string, keyType: keyof typeof SERVER_KEYS = 'ec'): ServerCertificate {
  const { dir } = ca;
  openssl(['req', '-new', ...SERVER_KEYS[keyType], '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=localhost/O=${name}`], dir);
  writeFileSync(path.join(dir, `${name}.ext`), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  openssl([
    'x509', '-req', '-in', `${name}.csr`, '-CA', 'intermediate.pem', '-CAkey', 'intermediate.key', '-CAcreateserial', '-days', '2',
    '-extfile', `${name}.ext`, '-out', `${name}.pem`,
  ], dir);
  const leaf = readFileSync(path.join(dir, `${name}.pem`));
  return {
    chain: Buffer.concat([leaf, readFileSync(path.join(dir, 'intermediate.pem'))]),
    key: readFileSync(path.join(dir, `${name}.key`)),
    fingerprint256: new X509Certificate(leaf).fingerprint256,
  };
}

/**
 * Writes `content` to `file` as a renewal does: a new file renamed over the old one, so a reader sees the old
 * content or the new, never a part. The key file is made 0600, the mode plantstore requires.
 */
export function replaceFile(file: string, content: Buffer | string, mode = 0o600): void {
  const next = `${file}.next`;
  writeFileSync(next, content, { mode });
  chmodSync(next, mode);
  renameSync(next, file);
}
