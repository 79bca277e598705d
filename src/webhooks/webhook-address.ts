// Where a webhook may go (docs/api.md, "Webhooks", SSRF): http(s) only, and only to public
// addresses. A host is resolved (every address it has) when the endpoint is created and again
// before each delivery, and the delivery connects to the address that was checked, so a DNS
// answer that changes in between cannot point it at the service's own network.
import dns from 'node:dns/promises';
import net from 'node:net';

/** Loopback, private, link-local (cloud metadata), CGNAT, unspecified, multicast and reserved ranges. */
const FORBIDDEN = new net.BlockList();
for (const [prefix, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  FORBIDDEN.addSubnet(prefix, bits, 'ipv4');
for (const [prefix, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  FORBIDDEN.addSubnet(prefix, bits, 'ipv6');

/** The 16 bytes of an IPv6 address. */
function ipv6Bytes(address: string): Buffer {
  let text = address.split('%')[0];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1].split('.').map(Number);
    text = `${text.slice(0, -dotted[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const parts = tail === undefined ? headParts : [...headParts, ...Array(8 - headParts.length - tailParts.length).fill('0'), ...tailParts];
  const bytes = Buffer.alloc(16);
  parts.forEach((part, i) => bytes.writeUInt16BE(Number.parseInt(part || '0', 16), i * 2));
  return bytes;
}

/** The IPv4 address an IPv6 one carries (IPv4-mapped ::ffff:a.b.c.d, or NAT64 64:ff9b::a.b.c.d), if any. */
function embeddedIpv4(address: string): string | undefined {
  const bytes = ipv6Bytes(address);
  const mapped = bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  const nat64 = bytes.readUInt32BE(0) === 0x0064ff9b && bytes.subarray(4, 12).every((b) => b === 0);
  return mapped || nat64 ? [...bytes.subarray(12)].join('.') : undefined;
}

/** Why a webhook may not connect to this address, or null when it may. */
export function forbiddenAddressReason(address: string): string | null {
  const family = net.isIP(address);
  if (family === 4) return FORBIDDEN.check(address, 'ipv4') ? 'a loopback, private, link-local or reserved address' : null;
  if (family === 6) {
    const v4 = embeddedIpv4(address);
    if (v4 !== undefined) return forbiddenAddressReason(v4);
    return FORBIDDEN.check(address, 'ipv6') ? 'a loopback, private, link-local or reserved address' : null;
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
  if (!allowPrivate) {
    for (const { address } of addresses) {
      const reason = forbiddenAddressReason(address);
      if (reason) {
        throw new WebhookAddressError(
          `the webhook URL's host "${host}" resolves to ${address}, ${reason}: webhooks go to public addresses only (UGS_WEBHOOK_ALLOW_PRIVATE)`,
          'forbidden_address',
        );
      }
    }
  }
  const first = addresses[0];
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}
