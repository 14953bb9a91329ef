import dns from 'node:dns';
import net, { type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { buildConnector } from 'undici';

/** Resolves a host name to its addresses; dns.lookup by default, a stub in tests. */
export type Resolver = (hostname: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: number }>>;

export const systemResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, order: 'verbatim' });

/** A subscription's address is not public and private networks are not allowed: nothing was sent. */
export class RefusedAddressError extends Error {
  readonly code = 'ERR_WEBHOOK_ADDRESS_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'RefusedAddressError';
  }
}

/** ipaddr.js's names of ranges, as the refusal says them. */
const RANGE_WORDS: Readonly<Record<string, string>> = {
  unspecified: 'unspecified',
  loopback: 'loopback',
  private: 'private (RFC 1918)',
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  carrierGradeNat: 'carrier-grade NAT',
  multicast: 'multicast',
  broadcast: 'broadcast',
  reserved: 'reserved',
};

/**
 * Why a webhook may not be sent to `address`, or undefined when it may: only public unicast addresses are allowed.
 * ipaddr.js (the classification request-filtering-agent and others build on) names the range; everything but
 * `unicast` is refused: loopback, RFC 1918, unique-local, link-local (169.254/16, where cloud metadata answers),
 * unspecified, carrier-grade NAT, multicast, reserved, documentation and the IPv6 ranges that embed an IPv4 address
 * (NAT64, 6to4, Teredo). An IPv4-mapped IPv6 address is judged as the IPv4 address it maps.
 */
export function refusedAddressReason(address: string): string | undefined {
  if (!net.isIP(address)) return `${address} is not an IP address`;
  const parsed = ipaddr.process(address);
  const range = parsed.range();
  if (range === 'unicast') return undefined;
  return `${address} is a ${RANGE_WORDS[range] ?? range} address`;
}

/**
 * A `lookup` for net.connect that resolves with `resolve` and hands on only addresses that may be reached, so the
 * check is made on the very address the socket then connects to: a name resolving to 127.0.0.1 (or resolving to a
 * public address when the subscription was added and to a private one now: DNS rebinding) is refused at connect time.
 */
function guardedLookup(resolve: Resolver, allowPrivateNetworks: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
        const candidates = addresses.filter((entry) => family === 0 || entry.family === family);
        const allowed = allowPrivateNetworks ? candidates : candidates.filter((entry) => refusedAddressReason(entry.address) === undefined);
        const first = allowed[0];
        if (!first) {
          const why =
            candidates.length === 0
              ? `${hostname} has no address`
              : `${hostname} resolves only to refused addresses: ${candidates.map((entry) => refusedAddressReason(entry.address)).join('; ')}`;
          callback(new RefusedAddressError(why), '', 0);
          return;
        }
        if (options.all) callback(null, allowed.map((entry) => ({ address: entry.address, family: entry.family })));
        else callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, '', 0),
    );
  };
}

export interface ConnectorOptions {
  readonly allowPrivateNetworks: boolean;
  readonly resolve: Resolver;
  /** Bound on connecting (and TLS), in milliseconds. */
  readonly timeoutMs: number;
}

/**
 * undici's own connector with the address check around it: a literal IP in the URL is checked before connecting
 * (net.connect does not call lookup for one), a name through the guarded lookup, and the socket's remote address
 * once more after connecting, whatever path led there. With private networks allowed only the resolver is swapped.
 */
export function guardedConnector(options: ConnectorOptions): buildConnector.connector {
  const connect = buildConnector({ lookup: guardedLookup(options.resolve, options.allowPrivateNetworks), timeout: options.timeoutMs });
  if (options.allowPrivateNetworks) return connect;
  return (connectOptions, callback) => {
    const literal = net.isIP(connectOptions.hostname) ? refusedAddressReason(connectOptions.hostname) : undefined;
    if (literal) {
      callback(new RefusedAddressError(literal), null);
      return;
    }
    connect(connectOptions, (error, socket) => {
      if (error || !socket) {
        callback(error ?? new Error('connection failed'), null);
        return;
      }
      const remote = socket.remoteAddress;
      const refused = remote === undefined ? 'the connected address is unknown' : refusedAddressReason(remote);
      if (refused) {
        socket.destroy();
        callback(new RefusedAddressError(refused), null);
        return;
      }
      callback(null, socket);
    });
  };
}

/**
 * Why `url` cannot be a subscription's URL, or undefined when it can: it must be http or https, carry no credentials,
 * and, unless private networks are allowed, not name a refused literal address or `localhost`. Names are resolved
 * only when sending: DNS may answer differently then, and that is where it is checked.
 */
export function subscriptionUrlProblem(text: string, allowPrivateNetworks: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `${JSON.stringify(text)} is not a URL`;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `the URL must be https:// or http://, not ${url.protocol}//`;
  if (url.username || url.password) return 'the URL must not carry a user name or password';
  if (url.hash) return 'the URL must not have a #fragment';
  if (allowPrivateNetworks) return undefined;
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (net.isIP(host)) {
    const refused = refusedAddressReason(host);
    return refused && `${refused}; set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it`;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) {
    return `${host} is a loopback name; set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it`;
  }
  return undefined;
}
