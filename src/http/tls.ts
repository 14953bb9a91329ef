import { X509Certificate, constants as cryptoConstants, createPrivateKey } from 'node:crypto';
import { constants as fsConstants, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Server as TlsServer, createSecureContext, type SecureContextOptions, type TLSSocket } from 'node:tls';
import type { FastifyBaseLogger, FastifyHttpOptions, FastifyInstance } from 'fastify';
import ipaddr from 'ipaddr.js';
import { DEFAULT_TLS_CIPHERS, type TlsConfig, type TlsPolicy } from '../config/config.js';

/** What the server serves: a certificate chain, its key, and what TLS a client may speak with it. */
export interface ServedPair {
  readonly cert: Uint8Array;
  readonly key: Uint8Array;
  readonly policy: TlsPolicy;
}

/** A certificate chain and its key, read from TLS_CERT_FILE and TLS_KEY_FILE and checked to work together. */
export interface TlsCredentials extends ServedPair {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** Of the first certificate in the file, the server's own: what a client sees. */
  readonly certificate: { readonly subject: string; readonly fingerprint256: string; readonly validTo: Date };
}

/** TLS_MIN_VERSION and TLS_CIPHERS unset: TLS 1.2 with ECDHE and AEAD suites, and TLS 1.3. */
export const DEFAULT_TLS_POLICY: TlsPolicy = { minVersion: 'TLSv1.2', ciphers: DEFAULT_TLS_CIPHERS };

/** A certificate or key file that cannot be used: unreadable, too open, not PEM, or not a pair. */
export class TlsFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TlsFileError';
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----/;
const PEM_PRIVATE_KEY = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/;

/**
 * The largest certificate or key file read. A chain of a few certificates is a few KiB; the bound is what keeps a
 * file that is not one (a log, a disk image given by mistake) from being read whole into memory.
 */
export const TLS_FILE_MAX_BYTES = 1024 * 1024;

/**
 * How long reading both files may take. A file on a network mount that stops answering would otherwise keep the
 * start, or a reload and every reload after it, waiting for ever.
 */
const TLS_READ_TIMEOUT_MS = 5000;

/**
 * What the SSL options of every TLS context served are: TLS_MIN_VERSION and TLS_CIPHERS, the server's order of
 * preference among the suites a client offers (the list puts the strongest first), and no renegotiation. A client
 * that renegotiates makes the server redo the expensive half of a handshake whenever it likes, on a connection it
 * already has, and TLS 1.3 has no renegotiation at all; nothing a client of this API does needs it.
 */
export function secureContextOptions(pair: ServedPair): SecureContextOptions {
  return {
    cert: Buffer.from(pair.cert),
    key: Buffer.from(pair.key),
    minVersion: pair.policy.minVersion,
    ciphers: pair.policy.ciphers,
    honorCipherOrder: true,
    secureOptions: cryptoConstants.SSL_OP_NO_RENEGOTIATION,
  };
}

function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a named pipe (FIFO)';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * Reads `file` if it is a regular file of at most TLS_FILE_MAX_BYTES, returning its content and what fstat said of
 * the file opened (so the mode checked is that of the file read, even if the path is replaced meanwhile).
 * O_NONBLOCK: opening a named pipe that no one writes to would otherwise wait for a writer, holding one of libuv's
 * four file-system threads, and reading it would wait for data; opened so, it is seen for what it is by fstat and
 * refused before any read. Every read is asynchronous, so the event loop never waits on the file.
 */
async function readRegularFile(variable: string, file: string): Promise<{ content: Buffer; stats: Stats }> {
  let handle;
  try {
    handle = await open(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY);
  } catch (error) {
    throw new TlsFileError(`cannot read ${variable} ${file}: ${(error as Error).message}`);
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new TlsFileError(`${variable} ${file} is not a regular file: it is ${fileKind(stats)}`);
    if (stats.size > TLS_FILE_MAX_BYTES) throw new TlsFileError(`${variable} ${file} is ${stats.size} bytes, more than a certificate or key file can be (${TLS_FILE_MAX_BYTES})`);
    // One byte more than the bound, so a file that grew since fstat is caught rather than cut.
    const buffer = Buffer.alloc(TLS_FILE_MAX_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > TLS_FILE_MAX_BYTES) throw new TlsFileError(`${variable} ${file} is more than ${TLS_FILE_MAX_BYTES} bytes, more than a certificate or key file can be`);
    }
    return { content: Buffer.from(buffer.subarray(0, length)), stats };
  } catch (error) {
    if (error instanceof TlsFileError) throw error;
    throw new TlsFileError(`cannot read ${variable} ${file}: ${(error as Error).message}`);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * `work`, or a TlsFileError saying `late` once `timeoutMs` has passed without it settling. The work itself cannot be
 * stopped (a read stuck in the kernel stays stuck); what is bounded is how long the start or a reload waits for it.
 */
async function within<T>(work: Promise<T>, timeoutMs: number, late: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TlsFileError(late)), timeoutMs);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Reads both files, within TLS_READ_TIMEOUT_MS (or `timeoutMs`), and checks them as OpenSSH checks a private key
 * before using it: the key file must not be accessible by group or others (any of the mode's 077 bits), whoever can
 * read it can impersonate the server. Then that each file holds what it should, that the key belongs to the first
 * certificate, and that OpenSSL accepts the whole chain with the policy. Every failure names the file.
 */
export async function readTlsCredentials(files: TlsConfig, timeoutMs: number = TLS_READ_TIMEOUT_MS): Promise<TlsCredentials> {
  const { policy } = files;
  const reading = (async () => {
    const keyFile = await readRegularFile('TLS_KEY_FILE', files.keyFile);
    const mode = keyFile.stats.mode & 0o777;
    if ((mode & 0o077) !== 0) {
      throw new TlsFileError(
        `TLS_KEY_FILE ${files.keyFile}: permissions ${mode.toString(8).padStart(4, '0')} are too open; a private key must not be ` +
          `accessible by group or others (chmod 600 ${files.keyFile})`,
      );
    }
    const certFile = await readRegularFile('TLS_CERT_FILE', files.certFile);
    return { cert: certFile.content, key: keyFile.content };
  })();
  const { cert, key } = await within(
    reading,
    timeoutMs,
    `reading TLS_KEY_FILE ${files.keyFile} and TLS_CERT_FILE ${files.certFile} took more than ${timeoutMs} ms (a file on a mount that no longer answers?)`,
  );

  if (!PEM_CERTIFICATE.test(cert.toString('latin1'))) throw new TlsFileError(`TLS_CERT_FILE ${files.certFile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  let certificate: X509Certificate;
  try {
    // The first certificate of the file: the server's own, followed by its chain.
    certificate = new X509Certificate(cert);
  } catch (error) {
    throw new TlsFileError(`TLS_CERT_FILE ${files.certFile} is not a valid PEM certificate: ${(error as Error).message}`);
  }
  if (!PEM_PRIVATE_KEY.test(key.toString('latin1'))) throw new TlsFileError(`TLS_KEY_FILE ${files.keyFile} holds no PEM private key (-----BEGIN … PRIVATE KEY-----)`);
  let privateKey;
  try {
    // An encrypted key lands here too: a server restarted unattended has no one to type its passphrase.
    privateKey = createPrivateKey(key);
  } catch (error) {
    throw new TlsFileError(`TLS_KEY_FILE ${files.keyFile} is not a usable unencrypted PEM private key: ${(error as Error).message}`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new TlsFileError(
      `TLS_KEY_FILE ${files.keyFile} is not the key of the certificate in TLS_CERT_FILE ${files.certFile} ` +
        '(the file must start with the server\'s own certificate, followed by its chain)',
    );
  }
  try {
    createSecureContext(secureContextOptions({ cert, key, policy }));
  } catch (error) {
    throw new TlsFileError(`TLS_CERT_FILE ${files.certFile} with TLS_KEY_FILE ${files.keyFile} cannot be served: ${(error as Error).message}`);
  }
  return {
    cert,
    key,
    policy,
    certificate: { subject: certificate.subject.replace(/\n/g, ', '), fingerprint256: certificate.fingerprint256, validTo: new Date(certificate.validTo) },
  };
}

/**
 * Fastify options that serve HTTPS only with `credentials`, or the options unchanged without them. With a
 * serverFactory (the app's: src/http/http-server.ts, given the same credentials) Fastify makes no server of its own
 * and these `https` options only make it say https:// in the addresses it logs; without one, Fastify gives node:https
 * its `https` options alone and drops `http`, so the HTTP server options (header size, timeouts) are carried over into
 * them. Either way the handshake, which comes before the headers and without a bound of its own would get Node's
 * 120 s, gets the headers' time limit, so a client that opens a connection and says nothing is cut off as a slow
 * header is.
 */
export function withTls(options: FastifyHttpOptions<HttpServer>, credentials: TlsCredentials | undefined): FastifyHttpOptions<HttpServer> {
  if (!credentials) return options;
  const https: HttpsServerOptions = {
    ...options.http,
    ...(options.http?.headersTimeout !== undefined ? { handshakeTimeout: options.http.headersTimeout } : {}),
    ...secureContextOptions(credentials),
  };
  // Still typed as HTTP options: the https.Server Fastify makes of them is an http.Server to everything the app does
  // (its requests and replies are node:http's); only the reloader needs it as a tls.Server, and checks that it is.
  return { ...options, https } as FastifyHttpOptions<HttpServer>;
}

/**
 * Ends every connection whose TLS handshake fails or times out (a plain-HTTP request on the port, a client refusing
 * the certificate, one that never says hello). node:https hands these to the server's clientError listeners, and
 * the app's writes an HTTP answer and ends the socket: on a socket with no session that answer can never be sent,
 * so the socket would stay open, and a graceful shutdown would wait for it. Logged at debug, with the client's
 * address, for an operator chasing why a client cannot connect.
 */
export function endFailedHandshakes(app: FastifyInstance): void {
  const server: unknown = app.server;
  if (!(server instanceof TlsServer)) return;
  server.prependListener('tlsClientError', (error: Error, socket: TLSSocket) => {
    app.log.debug({ err: error, remoteAddress: socket.remoteAddress }, 'TLS handshake failed');
    socket.destroy();
  });
}

function certificateFields(credentials: TlsCredentials) {
  const { subject, fingerprint256, validTo } = credentials.certificate;
  return { subject, fingerprint256, validTo: validTo.toISOString() };
}

/**
 * At start, once listening: with TLS, what certificate is served (and a warning if it has expired); without, one
 * warning when any address listened on is not loopback, since bearer tokens then cross the network in clear.
 */
export function logTransportSecurity(app: FastifyInstance, credentials: TlsCredentials | undefined): void {
  if (credentials) {
    app.log.info({ certificate: certificateFields(credentials) }, 'serving HTTPS only');
    warnIfExpired(app.log, credentials);
    return;
  }
  const exposed = app.addresses().filter((address): address is AddressInfo => typeof address !== 'string' && !isLoopback(address.address));
  if (exposed.length > 0) {
    app.log.warn(
      { addresses: exposed.map((address) => `${address.address}:${address.port}`) },
      'serving plain HTTP on a non-loopback address: bearer tokens will cross the network in clear unless a TLS proxy ' +
        'is in front; set TLS_CERT_FILE and TLS_KEY_FILE to serve HTTPS',
    );
  }
}

function isLoopback(address: string): boolean {
  return ipaddr.isValid(address) && ipaddr.process(address).range() === 'loopback';
}

function warnIfExpired(log: FastifyBaseLogger, credentials: TlsCredentials): void {
  if (credentials.certificate.validTo.getTime() <= Date.now()) {
    log.warn({ certificate: certificateFields(credentials) }, 'the TLS certificate has expired: clients will refuse it');
  }
}

/**
 * Serves new connections of the app's server with `pair` (server.setSecureContext; connections already open keep
 * theirs). The same options as at start, policy included: setSecureContext resets whatever it is not given.
 */
export function serveCertificate(app: FastifyInstance, pair: ServedPair): void {
  const server: unknown = app.server;
  if (!(server instanceof TlsServer)) throw new Error('the server was started without TLS');
  server.setSecureContext(secureContextOptions(pair));
}

/**
 * What SIGHUP does: re-reads TLS_CERT_FILE and TLS_KEY_FILE and hands the pair to `serve`, which makes every
 * listening server use it for new connections (serveCertificate; with WORKERS > 1, in every worker), or, when the
 * new pair cannot be used, logs why and keeps serving the previous one. Reloads run one after another, so the last
 * signal's files win; each is bounded in time (reading the files, then handing them over, each within `timeoutMs`),
 * so one that hangs is logged as failed and the next SIGHUP is honoured. Without TLS there is nothing to reload,
 * which is logged: the handler must exist either way, as Node's default for SIGHUP is to end the process.
 */
export function certificateReloader(
  log: FastifyBaseLogger,
  files: TlsConfig | null,
  serve: (credentials: TlsCredentials) => void | Promise<void>,
  timeoutMs: number = TLS_READ_TIMEOUT_MS,
): () => Promise<void> {
  let last = Promise.resolve();
  const reload = async () => {
    if (!files) {
      log.info('SIGHUP: TLS is not configured (TLS_CERT_FILE, TLS_KEY_FILE), nothing to reload');
      return;
    }
    try {
      const credentials = await readTlsCredentials(files, timeoutMs);
      await within(Promise.resolve(serve(credentials)), timeoutMs, `the servers did not take the new certificate within ${timeoutMs} ms`);
      log.info({ certificate: certificateFields(credentials) }, 'TLS certificate reloaded: new connections get it');
      warnIfExpired(log, credentials);
    } catch (error) {
      // A file problem is told in full by its message; anything else also gets its stack.
      const detail = error instanceof TlsFileError ? {} : { err: error };
      log.error(detail, `TLS certificate not reloaded, still serving the previous one: ${(error as Error).message}`);
    }
  };
  return () => (last = last.then(reload));
}
