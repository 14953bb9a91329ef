/**
 * The TLS part of the configuration (TLS_CERT_FILE, TLS_KEY_FILE, TLS_MIN_VERSION, TLS_CIPHERS): what it holds and
 * how loadConfig (./config.ts) reads it; src/http/tls.ts serves it.
 */
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { ConfigError, read, type Env } from './variables.js';

/** What TLS a client may speak (TLS_MIN_VERSION, TLS_CIPHERS); src/http/tls.ts serves it. */
export interface TlsPolicy {
  readonly minVersion: TlsMinVersion;
  /** OpenSSL cipher list for TLS 1.2 and below (TLS 1.3 suites are all AEAD with forward secrecy, and keep Node's). */
  readonly ciphers: string;
}

type TlsMinVersion = 'TLSv1.2' | 'TLSv1.3';

/**
 * The TLS 1.2 suites served by default: ECDHE key exchange (forward secrecy) with an AEAD cipher, as Mozilla's
 * "intermediate" profile without its finite-field DHE (slow, and weak with the parameters clients often offer).
 * Static-RSA key exchange and CBC suites, which Node's default list still has, are left out.
 */
export const DEFAULT_TLS_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** A certificate (chain) and its private key, PEM files read at start and again on SIGHUP (src/http/tls.ts). */
export interface TlsConfig {
  readonly certFile: string;
  readonly keyFile: string;
  readonly policy: TlsPolicy;
}

/** HTTPS when both TLS_CERT_FILE and TLS_KEY_FILE are set (resolved against `cwd`), null when neither is. */
export function tlsConfig(env: Env, cwd: string): TlsConfig | null {
  const certFile = read(env, 'TLS_CERT_FILE')?.trim() || undefined;
  const keyFile = read(env, 'TLS_KEY_FILE')?.trim() || undefined;
  // Checked with TLS off too: a policy set for when it is turned on fails now, not then.
  const policy = tlsPolicy(env);
  if (certFile === undefined && keyFile === undefined) return null;
  if (certFile === undefined || keyFile === undefined) {
    const [missing, given] = certFile === undefined ? (['TLS_CERT_FILE', 'TLS_KEY_FILE'] as const) : (['TLS_KEY_FILE', 'TLS_CERT_FILE'] as const);
    throw new ConfigError(missing, `is not set but ${given} is: set both TLS_CERT_FILE and TLS_KEY_FILE to serve HTTPS, or neither`);
  }
  return { certFile: path.resolve(cwd, certFile), keyFile: path.resolve(cwd, keyFile), policy };
}

const TLS_MIN_VERSIONS: readonly TlsMinVersion[] = ['TLSv1.2', 'TLSv1.3'];

/**
 * TLS_MIN_VERSION and TLS_CIPHERS, checked here so a typo fails the start naming the variable: OpenSSL ignores the
 * names it does not know in a cipher list, and refuses a list of which it knows none.
 */
function tlsPolicy(env: Env): TlsPolicy {
  const minVersion = read(env, 'TLS_MIN_VERSION')?.trim() || 'TLSv1.2';
  if (!TLS_MIN_VERSIONS.includes(minVersion as TlsMinVersion)) {
    throw new ConfigError('TLS_MIN_VERSION', `must be one of ${TLS_MIN_VERSIONS.join(', ')}, got ${JSON.stringify(minVersion)}`);
  }
  const ciphers = read(env, 'TLS_CIPHERS')?.trim() || DEFAULT_TLS_CIPHERS;
  try {
    createSecureContext({ ciphers });
  } catch (error) {
    throw new ConfigError('TLS_CIPHERS', `is not an OpenSSL cipher list OpenSSL can use (${(error as Error).message}), got ${JSON.stringify(ciphers)}`);
  }
  return { minVersion: minVersion as TlsMinVersion, ciphers };
}
