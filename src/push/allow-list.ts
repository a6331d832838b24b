import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where a push may go (BATON_PUSH_ALLOW, docs/push.md): `*` lets any host whose addresses are all
 * public; a host name (or `*.example.com`) lets that host wherever it resolves; an address or CIDR
 * lets those addresses. Private, loopback, link-local and other special ranges are refused unless an
 * entry names them, so a key that may set a queue's push URL cannot make Baton call into its own
 * network (the cloud metadata address, the database, an admin port). A push connects to the address
 * it checked: a name that resolves differently a moment later cannot move it.
 */
export class PushAllowList {
  private readonly anyPublic: boolean;
  private readonly hosts: string[] = [];
  private readonly ranges = new BlockList();

  constructor(entries: readonly string[]) {
    this.anyPublic = entries.includes('*');
    for (const entry of entries) {
      if (entry === '*') continue;
      const [address, bits] = entry.split('/');
      const family = isIP(address!);
      if (family === 0) this.hosts.push(entry.toLowerCase());
      else if (bits === undefined) this.ranges.addAddress(address!, family === 4 ? 'ipv4' : 'ipv6');
      else this.ranges.addSubnet(address!, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
    }
  }

  private named(host: string): boolean {
    const h = host.toLowerCase();
    return this.hosts.some((e) => (e.startsWith('*.') ? h.endsWith(e.slice(1)) : h === e));
  }

  /**
   * The address a push to `url` connects to, or why it may not go: the host resolved, and every
   * address it has allowed (one not allowed refuses the host: DNS may answer any of them).
   */
  async resolve(url: URL): Promise<{ address: string; family: 4 | 6 } | { refused: string }> {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const named = this.named(host);
    let addresses: { address: string; family: number }[];
    try {
      addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true });
    } catch {
      return { refused: `host ${host} does not resolve` };
    }
    if (addresses.length === 0) return { refused: `host ${host} does not resolve` };
    for (const a of addresses) {
      const { address, family } = unmapped(a.address, a.family);
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (named || this.ranges.check(address, type)) continue;
      if (!this.anyPublic) return { refused: `host ${host} is not in BATON_PUSH_ALLOW` };
      if (SPECIAL.check(address, type)) {
        return {
          refused: `host ${host} resolves to ${address}, a private or special address not in BATON_PUSH_ALLOW`,
        };
      }
    }
    const first = unmapped(addresses[0]!.address, addresses[0]!.family);
    return { address: first.address, family: first.family === 4 ? 4 : 6 };
  }
}

/** An IPv4 address written as IPv6 (::ffff:10.0.0.1) is checked as the IPv4 address it is. */
function unmapped(address: string, family: number): { address: string; family: number } {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? { address: m[1]!, family: 4 } : { address, family };
}

/** Addresses no push goes to unless BATON_PUSH_ALLOW names them (IANA's special-purpose registries). */
const SPECIAL = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  // Documentation (TEST-NET-1, -2, -3) and the old 6to4 relay anycast: never a real endpoint.
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 3],
] as const) {
  SPECIAL.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 127],
  // NAT64 (well-known and local-use), Teredo and 6to4: each can carry an IPv4 address, a private
  // one included, inside an IPv6 one.
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['2001::', 32],
  ['2002::', 16],
  // Discard-only and documentation.
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  SPECIAL.addSubnet(net, bits, 'ipv6');
}
