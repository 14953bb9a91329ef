/**
 * The address policy (src/webhooks/address-policy.ts) over every kind of range, what a subscription URL may be, and
 * names refused at connect time by what they resolve to.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RefusedAddressError, guardedConnector, refusedAddressReason, subscriptionUrlProblem, type Resolver } from '../../src/webhooks/address-policy.js';

describe('the address policy', () => {
  const refused: Array<[string, RegExp]> = [
    ['127.0.0.1', /loopback/],
    ['127.255.0.9', /loopback/],
    ['::1', /loopback/],
    ['10.0.0.1', /private/],
    ['172.16.5.4', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.1', /private/],
    ['169.254.169.254', /link-local/],
    ['fe80::1', /link-local/],
    ['fc00::1', /unique-local/],
    ['fd12:3456::1', /unique-local/],
    ['0.0.0.0', /unspecified/],
    ['::', /unspecified/],
    ['::ffff:127.0.0.1', /loopback/],
    ['::ffff:10.0.0.1', /private/],
    ['100.64.0.1', /carrier-grade NAT/],
    ['224.0.0.1', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['64:ff9b::a00:1', /embeds 10\.0\.0\.1, a private/],
    ['2002:7f00:1::', /embeds 127\.0\.0\.1, a loopback/],
    // Every IPv6 form that embeds an IPv4 address is judged by the IPv4 rules on the address it embeds.
    ['::7f00:1', /embeds 127\.0\.0\.1, a loopback/], // IPv4-compatible (::/96), as the URL parser writes [::127.0.0.1]
    ['::127.0.0.1', /127\.0\.0\.1.*loopback/], // ipaddr.js reads the dotted form as IPv4-mapped: refused all the same
    ['::a9fe:a9fe', /embeds 169\.254\.169\.254, a link-local/],
    ['::a00:1', /embeds 10\.0\.0\.1, a private/],
    ['::ffff:169.254.169.254', /169\.254\.169\.254 is a link-local/], // IPv4-mapped (::ffff:0:0/96)
    ['::ffff:0:7f00:1', /embeds 127\.0\.0\.1, a loopback/], // IPv4-translated (::ffff:0:0:0/96)
    ['64:ff9b::7f00:1', /embeds 127\.0\.0\.1, a loopback/], // NAT64 well-known prefix (64:ff9b::/96)
    ['64:ff9b::a9fe:a9fe', /embeds 169\.254\.169\.254, a link-local/],
    ['64:ff9b:1::7f00:1', /NAT64/], // NAT64 local-use prefix (64:ff9b:1::/48): refused whole
    ['64:ff9b:1:abcd::808:808', /NAT64/],
    ['2002:a9fe:a9fe::1', /embeds 169\.254\.169\.254, a link-local/], // 6to4 (2002::/16)
    ['2002:c0a8:101::', /embeds 192\.168\.1\.1, a private/],
    ['2001:0:7f00:1::1', /embeds 127\.0\.0\.1, a loopback/], // Teredo server (2001::/32, bits 32-63)
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', /embeds 127\.0\.0\.1, a loopback/], // Teredo client, XOR 0xff (bits 96-127)
    ['2001:0:4136:e378:8000:63bf:f5ff:fefe', /embeds 10\.0\.1\.1, a private/],
    // Public IPv4 inside a translator's or tunnel's range: still refused by the IPv6 range itself.
    ['64:ff9b::808:808', /NAT64/],
    ['2002:808:808::1', /6to4/],
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', /Teredo/],
  ];
  for (const [address, why] of refused) {
    it(`refuses ${address}`, () => assert.match(refusedAddressReason(address) ?? 'allowed', why));
  }
  for (const address of ['93.184.216.34', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '::808:808']) {
    it(`allows the public ${address}`, () => assert.equal(refusedAddressReason(address), undefined));
  }
});

describe('subscription URLs', () => {
  it('must be http(s), without credentials, and not name a refused address or localhost unless allowed', () => {
    assert.equal(subscriptionUrlProblem('https://hooks.example.com/x?k=v', false), undefined);
    assert.equal(subscriptionUrlProblem('http://93.184.216.34:8080/', false), undefined);
    assert.match(subscriptionUrlProblem('http://127.0.0.1/', false) ?? '', /loopback.*WEBHOOK_ALLOW_PRIVATE_NETWORKS/);
    assert.match(subscriptionUrlProblem('http://2130706433/', false) ?? '', /127\.0\.0\.1 is a loopback/, 'the URL parser canonicalises it first');
    assert.match(subscriptionUrlProblem('http://[::1]:9/', false) ?? '', /loopback/);
    assert.match(subscriptionUrlProblem('http://api.localhost/', false) ?? '', /loopback name/);
    // A trailing dot names the same host, and embedded IPv4 literals are refused at `webhook add` too.
    assert.match(subscriptionUrlProblem('http://localhost./', false) ?? '', /localhost is a loopback name/);
    assert.match(subscriptionUrlProblem('http://api.localhost../', false) ?? '', /loopback name/);
    assert.match(subscriptionUrlProblem('http://127.0.0.1./', false) ?? '', /127\.0\.0\.1 is a loopback/);
    assert.match(subscriptionUrlProblem('http://[::127.0.0.1]/', false) ?? '', /embeds 127\.0\.0\.1, a loopback/);
    assert.match(subscriptionUrlProblem('http://[::a9fe:a9fe]/latest/meta-data/', false) ?? '', /169\.254\.169\.254, a link-local/);
    assert.match(subscriptionUrlProblem('http://[64:ff9b::7f00:1]/', false) ?? '', /embeds 127\.0\.0\.1/);
    assert.match(subscriptionUrlProblem('http://[2002:7f00:1::]/', false) ?? '', /embeds 127\.0\.0\.1/);
    assert.match(subscriptionUrlProblem('http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/', false) ?? '', /embeds 127\.0\.0\.1/);
    assert.equal(subscriptionUrlProblem('http://example.com./', false), undefined);
    assert.match(subscriptionUrlProblem('file:///etc/passwd', false) ?? '', /https:\/\/ or http:\/\//);
    assert.match(subscriptionUrlProblem('https://u:p@example.com/', false) ?? '', /user name or password/);
    assert.match(subscriptionUrlProblem('nope', false) ?? '', /not a URL/);
    assert.equal(subscriptionUrlProblem('http://127.0.0.1/', true), undefined);
  });
});

describe('names checked at connect time', () => {
  /** A resolver that knows only these names: the test makes no DNS lookup. */
  const stub: Resolver = async (hostname) => {
    const answers: Record<string, string> = {
      'localhost.': '127.0.0.1',
      'compat.example.test.': '::7f00:1',
      'nat64.example.test': '64:ff9b::a9fe:a9fe',
      'sixtofour.example.test': '2002:a00:1::1',
      'teredo.example.test.': '2001:0:4136:e378:8000:63bf:80ff:fffe',
    };
    const address = answers[hostname];
    if (address === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return [{ address, family: address.includes(':') ? 6 : 4 }];
  };
  const connect = guardedConnector({ allowPrivateNetworks: false, resolve: stub, timeoutMs: 2000 });
  const refusal = (hostname: string) =>
    new Promise<Error | null>((resolve) => {
      connect({ hostname, host: hostname, protocol: 'http:', port: '9' }, (error, socket) => {
        socket?.destroy();
        resolve(error);
      });
    });
  const cases: Array<[string, RegExp]> = [
    ['localhost.', /localhost\. resolves only to refused addresses: 127\.0\.0\.1 is a loopback/],
    ['compat.example.test.', /embeds 127\.0\.0\.1, a loopback/],
    ['nat64.example.test', /embeds 169\.254\.169\.254, a link-local/],
    ['sixtofour.example.test', /embeds 10\.0\.0\.1, a private/],
    ['teredo.example.test.', /embeds 127\.0\.0\.1, a loopback/],
  ];
  for (const [hostname, why] of cases) {
    it(`refuses ${hostname}, resolving to an address that is or embeds a refused one`, async () => {
      const error = await refusal(hostname);
      assert.ok(error instanceof RefusedAddressError, String(error));
      assert.match(error.message, why);
    });
  }
});
