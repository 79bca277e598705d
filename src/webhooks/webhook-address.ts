// Where a webhook may go (docs/api.md, "Webhooks", SSRF): http(s) only, and only to public
// addresses. Creating an endpoint refuses only what its URL itself says (a literal address
// webhooks may not reach, or a name of this host: `localhost`) and never resolves a name: what
// the service's own DNS knows must not show in whether an endpoint is accepted. Each attempt
// resolves the host (every address it has), and connects to the address that was checked, so a
// DNS answer that changes in between cannot point it at the service's own network. Every
// refusal, at creation or at an attempt, is one sentence naming the URL's host: a name that
// does not resolve and one that resolves to a private address fail alike.
import dns from 'node:dns/promises';
import net from 'node:net';

/**
 * IPv4 ranges a webhook may not reach: every block of IANA's IPv4 special-purpose registry
 * that is not globally reachable, and multicast. They also match the IPv4-mapped form
 * (::ffff:a.b.c.d): BlockList checks those against them.
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
/**
 * IPv6: only global unicast (2000::/3) is public. Everything outside it is refused: IANA's IPv6
 * address space registry reserves it, or gives it to unspecified and loopback (::/128, ::1),
 * IPv4-compatible and SIIT forms (::/96, ::ffff:0:0:0/96), discard-only (100::/64), NAT64
 * local use (64:ff9b:1::/48), SRv6 segment identifiers (5f00::/16), unique local (fc00::/7),
 * link-local (fe80::/10), site-local (fec0::/10) and multicast (ff00::/8). Two forms outside
 * it carry an IPv4 address and are checked as that address: IPv4-mapped (::ffff:0:0/96) and
 * NAT64's well-known prefix (64:ff9b::/96). Inside it, the blocks of IANA's IPv6
 * special-purpose registry that no receiver's normal public address is in:
 */
for (const [prefix, bits] of [
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, ORCHID, AMT, TURN anycast…
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4
  ['3fff::', 20], // documentation
] as const)
  FORBIDDEN.addSubnet(prefix, bits, 'ipv6');

const GLOBAL_UNICAST = new net.BlockList();
GLOBAL_UNICAST.addSubnet('2000::', 3, 'ipv6');
const IPV4_MAPPED = new net.BlockList();
IPV4_MAPPED.addSubnet('::ffff:0:0', 96, 'ipv6');
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
    if (IPV4_MAPPED.check(address, 'ipv6') || NAT64_WELL_KNOWN.check(address, 'ipv6')) return forbiddenAddressReason(lastIpv4Of(address));
    if (!GLOBAL_UNICAST.check(address, 'ipv6') || FORBIDDEN.check(address, 'ipv6')) return FORBIDDEN_REASON;
    return null;
  }
  return 'not an IP address';
}

/**
 * Names that are this host whatever a DNS server says: `localhost` and every name under it,
 * which RFC 6761 reserves for loopback. Refused by their text, like a literal loopback address.
 */
function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * The one answer for every refused host: the same sentence for a literal address, for
 * `localhost`, for a name that resolves to a refused address and, at an attempt, for a name
 * that does not resolve, so that no refusal tells a tenant what the service's own DNS knows.
 */
export function refusedHostMessage(host: string): string {
  return `the webhook URL's host "${host}" is not a public address, or does not resolve to one: webhooks go to public addresses only (UGS_WEBHOOK_ALLOW_PRIVATE)`;
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
    readonly issue: 'scheme' | 'forbidden_address',
  ) {
    super(message);
    this.name = 'WebhookAddressError';
  }
}

/** The URL's host as an address or a name: brackets of an IPv6 literal removed. */
function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * Parses a webhook URL and refuses what its text says webhooks may not reach: a scheme other
 * than http(s), a literal address that is not public, a name of this host. It resolves
 * nothing (an endpoint's creation): a name is checked at each attempt, by checkWebhookTarget.
 * `allowPrivate` (UGS_WEBHOOK_ALLOW_PRIVATE) lets any host through.
 */
export function parseWebhookUrl(text: string, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new WebhookAddressError('the webhook URL is not a valid absolute URL', 'scheme');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new WebhookAddressError(`a webhook URL must be http or https, not ${url.protocol}`, 'scheme');
  const host = hostOf(url);
  if (allowPrivate) return url;
  // The URL parser has already written any IPv4 form (0x7f.1, 2130706433) as a.b.c.d.
  if (net.isIP(host) ? forbiddenAddressReason(host) !== null : isLocalhostName(host))
    throw new WebhookAddressError(refusedHostMessage(host), 'forbidden_address');
  return url;
}

/**
 * Before an attempt: the URL as parseWebhookUrl checks it, then its host resolved, and every
 * address must be allowed (a host with one public and one private address is refused). A name
 * that does not resolve is refused in the same words as one that resolves to a private
 * address; with `allowPrivate`, where every address is allowed, it says it does not resolve.
 */
export async function checkWebhookTarget(text: string, allowPrivate: boolean): Promise<CheckedTarget> {
  const url = parseWebhookUrl(text, allowPrivate);
  const host = hostOf(url);
  let addresses: { address: string; family: number }[] = [];
  try {
    addresses = net.isIP(host) ? [{ address: host, family: net.isIP(host) }] : await dns.lookup(host, { all: true, verbatim: true });
  } catch {
    // Below: no address is as refused as a forbidden one.
  }
  if (allowPrivate && addresses.length === 0) throw new WebhookAddressError(`the webhook URL's host "${host}" does not resolve`, 'forbidden_address');
  if (addresses.length === 0 || (!allowPrivate && addresses.some(({ address }) => forbiddenAddressReason(address) !== null)))
    throw new WebhookAddressError(refusedHostMessage(host), 'forbidden_address');
  const first = addresses[0];
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}
