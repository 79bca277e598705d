// Where a webhook may go (docs/api.md, "Webhooks", SSRF): http(s) only, and only to public
// addresses. A host is resolved (every address it has) when the endpoint is created and again
// before each delivery, and the delivery connects to the address that was checked, so a DNS
// answer that changes in between cannot point it at the service's own network. A refusal
// names the URL's host, never what it resolved to: a tenant must not map the internal DNS.
import dns from 'node:dns/promises';
import net from 'node:net';

/**
 * Every range a webhook may not reach. IPv4 rules also match the IPv4-mapped form
 * (::ffff:a.b.c.d): BlockList checks those against them. The IPv6 forms that embed or route
 * to an IPv4 address behind a gateway (IPv4-compatible, SIIT, NAT64 local use, 6to4, Teredo)
 * are refused whole: none is a receiver's normal public address.
 */
const FORBIDDEN = new net.BlockList();
for (const [prefix, bits] of [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  FORBIDDEN.addSubnet(prefix, bits, 'ipv4');
for (const [prefix, bits] of [
  ['::', 96], // unspecified, loopback and IPv4-compatible (::a.b.c.d, deprecated)
  ['::ffff:0:0:0', 96], // SIIT IPv4-translated (::ffff:0:a.b.c.d)
  ['64:ff9b:1::', 48], // NAT64 local use
  ['100::', 64], // discard-only
  ['2001::', 32], // Teredo
  ['2001:2::', 48], // benchmarking
  ['2001:10::', 28], // ORCHID (deprecated)
  ['2001:20::', 28], // ORCHIDv2
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4
  ['3fff::', 20], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const)
  FORBIDDEN.addSubnet(prefix, bits, 'ipv6');

/** NAT64's well-known prefix: a public IPv4 address behind it is as public as itself, a private one is not. */
const NAT64_WELL_KNOWN = new net.BlockList();
NAT64_WELL_KNOWN.addSubnet('64:ff9b::', 96, 'ipv6');

/** The IPv4 address in the last 32 bits of an IPv6 address (in its normalized form, as the URL parser writes it). */
function lastIpv4Of(address: string): string {
  const groups = new URL(`http://[${address.split('%')[0]}]/`).hostname.slice(1, -1).split(':');
  const value = (Number.parseInt(groups.at(-2) || '0', 16) << 16) | Number.parseInt(groups.at(-1) || '0', 16);
  return [24, 16, 8, 0].map((shift) => (value >>> shift) & 0xff).join('.');
}

const FORBIDDEN_REASON = 'a private or reserved address';

/** Why a webhook may not connect to this address, or null when it may. */
export function forbiddenAddressReason(address: string): string | null {
  const family = net.isIP(address);
  if (family === 4) return FORBIDDEN.check(address, 'ipv4') ? FORBIDDEN_REASON : null;
  if (family === 6) {
    if (FORBIDDEN.check(address, 'ipv6')) return FORBIDDEN_REASON;
    if (NAT64_WELL_KNOWN.check(address, 'ipv6')) return forbiddenAddressReason(lastIpv4Of(address));
    return null;
  }
  return 'not an IP address';
}

export interface CheckedTarget {
  url: URL;
  /** The address to connect to: one the host resolved to, checked. */
  address: string;
  family: 4 | 6;
}

/** Why a URL is refused; the message names the URL's host, never more of it. */
export class WebhookAddressError extends Error {
  constructor(
    message: string,
    readonly issue: 'scheme' | 'unresolvable' | 'forbidden_address',
  ) {
    super(message);
    this.name = 'WebhookAddressError';
  }
}

/**
 * Parses a webhook URL and resolves its host: every address must be allowed (a host with one
 * public and one private address is refused). `allowPrivate` (UGS_WEBHOOK_ALLOW_PRIVATE) lets
 * any address through.
 */
export async function checkWebhookTarget(text: string, allowPrivate: boolean): Promise<CheckedTarget> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new WebhookAddressError('the webhook URL is not a valid absolute URL', 'scheme');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new WebhookAddressError(`a webhook URL must be http or https, not ${url.protocol}`, 'scheme');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: { address: string; family: number }[];
  try {
    addresses = net.isIP(host) ? [{ address: host, family: net.isIP(host) }] : await dns.lookup(host, { all: true, verbatim: true });
  } catch {
    throw new WebhookAddressError(`the webhook URL's host "${host}" does not resolve`, 'unresolvable');
  }
  if (addresses.length === 0) throw new WebhookAddressError(`the webhook URL's host "${host}" does not resolve`, 'unresolvable');
  if (!allowPrivate && addresses.some(({ address }) => forbiddenAddressReason(address) !== null)) {
    // Which address it was is not said: for a name, that would tell a tenant what the service's own DNS knows.
    const what = net.isIP(host) ? 'is' : 'resolves to';
    throw new WebhookAddressError(
      `the webhook URL's host "${host}" ${what} ${FORBIDDEN_REASON}: webhooks go to public addresses only (UGS_WEBHOOK_ALLOW_PRIVATE)`,
      'forbidden_address',
    );
  }
  const first = addresses[0];
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}
