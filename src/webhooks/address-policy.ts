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
  rfc6052: 'NAT64 (RFC 6052)',
  rfc6145: 'IPv4-translated (RFC 6145)',
  '6to4': '6to4',
  teredo: 'Teredo',
};

/** "a loopback address", "an unspecified address". */
function describeRange(range: string): string {
  const words = RANGE_WORDS[range] ?? range;
  return `${/^[aeiou]/i.test(words) ? 'an' : 'a'} ${words} address`;
}

/** The bytes of `bytes` from `start` as an IPv4 address, each XORed with `mask` (Teredo obscures its client's). */
function ipv4At(bytes: readonly number[], start: number, mask = 0): ipaddr.IPv4 {
  return new ipaddr.IPv4(bytes.slice(start, start + 4).map((byte) => byte ^ mask));
}

/**
 * The IPv4 addresses an IPv6 address carries, which a host, a tunnel or a translator on the way may deliver to:
 * IPv4-compatible (::/96, RFC 4291 §2.5.5.1), IPv4-translated (::ffff:0:0:0/96, RFC 6145),
 * NAT64's well-known prefix (64:ff9b::/96, RFC 6052), 6to4 (2002::/16, RFC 3056) and Teredo's server and client
 * (2001::/32, RFC 4380). IPv4-mapped addresses (::ffff:0:0/96) are left to ipaddr.js, which judges them as the
IPv4 address they map. NAT64's local-use prefix 64:ff9b:1::/48 (RFC 8215) may place the IPv4 address anywhere
 * its operator chose, so it is refused as a whole (ipaddr.js does not call it unicast).
 */
function embeddedIpv4(address: ipaddr.IPv6): ipaddr.IPv4[] {
  const bytes = address.toByteArray();
  const words = address.parts;
  const zeros = (from: number, to: number) => words.slice(from, to).every((word) => word === 0);
  // :: and ::1 are IPv6's own unspecified and loopback addresses, judged as such by their range.
  const compatible = zeros(0, 6) && !(words[6] === 0 && (words[7] as number) <= 1);
  if (compatible || (zeros(0, 4) && words[4] === 0xffff && words[5] === 0)) {
    return [ipv4At(bytes, 12)];
  }
  if (words[0] === 0x64 && words[1] === 0xff9b && zeros(2, 6)) return [ipv4At(bytes, 12)];
  if (words[0] === 0x2002) return [ipv4At(bytes, 2)];
  if (words[0] === 0x2001 && words[1] === 0) return [ipv4At(bytes, 4), ipv4At(bytes, 12, 0xff)];
  return [];
}

/**
 * Why a webhook may not be sent to `address`, or undefined when it may: only public unicast addresses are allowed.
 * ipaddr.js (the classification request-filtering-agent and others build on) names the range; everything but
 * `unicast` is refused: loopback, RFC 1918, unique-local, link-local (169.254/16, where cloud metadata answers),
 * unspecified, carrier-grade NAT, multicast, reserved, documentation and the IPv6 ranges of translators and tunnels
 * (NAT64, 6to4, Teredo). An IPv6 address that embeds an IPv4 address is first judged by the IPv4 rules on every
 * address it embeds (embeddedIpv4), so `::7f00:1` is refused as 127.0.0.1 is.
 */
export function refusedAddressReason(address: string): string | undefined {
  if (!net.isIP(address)) return `${address} is not an IP address`;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6') {
    for (const embedded of embeddedIpv4(parsed as ipaddr.IPv6)) {
      const range = embedded.range();
      if (range !== 'unicast') return `${address} embeds ${embedded.toString()}, ${describeRange(range)}`;
    }
  }
  const range = ipaddr.process(address).range();
  if (range === 'unicast') return undefined;
  return `${address} is ${describeRange(range)}`;
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
  // A fully qualified name's trailing dot (`localhost.`) names the same host.
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname.replace(/\.+$/, '');
  if (net.isIP(host)) {
    const refused = refusedAddressReason(host);
    return refused && `${refused}; set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it`;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) {
    return `${host} is a loopback name; set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to allow it`;
  }
  return undefined;
}
