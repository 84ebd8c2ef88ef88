/**
 * Which addresses the prober may connect to (issue 44, item 4). A definition's `url` is a tenant's input: probing
 * it must not become a way to reach the registry's own network. By default every address that is not a public
 * unicast address is refused: loopback, private, shared (CGNAT), link-local, unique-local, multicast, reserved,
 * documentation and benchmarking ranges, and the cloud metadata services; an IPv6 address that carries an IPv4
 * one (mapped, compatible, NAT64, 6to4) is judged by the IPv4 address it carries. `PROBE_ALLOW` opens ranges
 * (CIDRs) and host names a deployment needs. Pure: the prober checks the address each connection is made to
 * (live-card-fetch.ts), after its own resolution, so a name cannot resolve to another address between the check
 * and the connection.
 */
import { isIP } from "node:net";

/** An address range: the address's bits as one bigint (IPv4 in 32 bits, IPv6 in 128) and a prefix length. */
interface Range {
  readonly family: 4 | 6;
  readonly bits: bigint;
  readonly prefix: number;
  /** What the range is, for the refusal's message. */
  readonly what: string;
}

/** The ranges refused by default, IPv4 first (RFC 6890's special-purpose registries, and the metadata services). */
const REFUSED: readonly [string, string][] = [
  ["0.0.0.0/8", "this network"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "shared (CGNAT)"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local (cloud metadata)"],
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "IETF protocol assignments"],
  ["192.0.2.0/24", "documentation"],
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "benchmarking"],
  ["198.51.100.0/24", "documentation"],
  ["203.0.113.0/24", "documentation"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved"],
  ["168.63.129.16/32", "cloud metadata (Azure)"],
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["100::/64", "discard"],
  ["2001:db8::/32", "documentation"],
  ["fc00::/7", "unique-local"],
  ["fe80::/10", "link-local"],
  ["fec0::/10", "site-local"],
  ["ff00::/8", "multicast"],
];

/** IPv6 prefixes whose addresses carry an IPv4 address in their last 32 bits (6to4 carries it in bits 16-48). */
const CARRIERS: readonly [string, string][] = [
  ["::ffff:0:0/96", "IPv4-mapped"],
  ["::/96", "IPv4-compatible"],
  ["64:ff9b::/96", "NAT64"],
  ["64:ff9b:1::/48", "NAT64 (local)"],
];
const SIX_TO_FOUR = "2002::/16";

/** The address as a bigint and its family; undefined when it is not an IP address. */
export function addressBits(address: string): { family: 4 | 6; bits: bigint } | undefined {
  const zone = address.indexOf("%");
  const plain = zone === -1 ? address : address.slice(0, zone);
  const family = isIP(plain);
  if (family === 4) return { family, bits: ipv4Bits(plain) };
  if (family === 6) return { family, bits: ipv6Bits(plain) };
  return undefined;
}

function ipv4Bits(address: string): bigint {
  return address.split(".").reduce((bits, octet) => (bits << 8n) | BigInt(Number(octet)), 0n);
}

/** An IPv6 address (validated by isIP) as 128 bits; a trailing dotted IPv4 part counts as its last 32. */
function ipv6Bits(address: string): bigint {
  let text = address.toLowerCase();
  let tail: bigint | undefined;
  const lastColon = text.lastIndexOf(":");
  if (text.includes(".", lastColon)) {
    tail = ipv4Bits(text.slice(lastColon + 1));
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const groups = rest === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  const bits = groups.reduce((acc: bigint, group: string) => (acc << 16n) | BigInt(Number.parseInt(group, 16)), 0n);
  return tail === undefined ? bits : (bits & ~0xffffffffn) | tail;
}

/** A CIDR (`10.0.0.0/8`, `::1/128`, or a bare address: its own /32 or /128) as a Range; undefined when invalid. */
export function parseRange(cidr: string, what = cidr): Range | undefined {
  const slash = cidr.indexOf("/");
  const parsed = addressBits(slash === -1 ? cidr : cidr.slice(0, slash));
  if (parsed === undefined) return undefined;
  const width = parsed.family === 4 ? 32 : 128;
  const prefixText = slash === -1 ? String(width) : cidr.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > width) return undefined;
  return { family: parsed.family, bits: parsed.bits, prefix, what };
}

function inRange(range: Range, family: 4 | 6, bits: bigint): boolean {
  if (range.family !== family) return false;
  const width = family === 4 ? 32 : 128;
  const shift = BigInt(width - range.prefix);
  return bits >> shift === range.bits >> shift;
}

const must = (cidr: string, what: string): Range => {
  const range = parseRange(cidr, what);
  if (range === undefined) throw new Error(`${cidr} is not a range.`);
  return range;
};
const refused = REFUSED.map(([cidr, what]) => must(cidr, what));
const carriers = CARRIERS.map(([cidr, what]) => must(cidr, what));
const sixToFour = must(SIX_TO_FOUR, "6to4");

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if it carries one. */
function carriedIpv4(bits: bigint): bigint | undefined {
  if (bits === 0n || bits === 1n) return undefined; // `::` and `::1` are IPv6's own, in REFUSED
  if (carriers.some((range) => inRange(range, 6, bits))) return bits & 0xffffffffn;
  if (inRange(sixToFour, 6, bits)) return (bits >> 80n) & 0xffffffffn;
  return undefined;
}

/** What a deployment allows besides public addresses (`PROBE_ALLOW`): ranges and host names (lower case). */
export interface ProbeAllowance {
  readonly ranges: readonly Range[];
  readonly hosts: ReadonlySet<string>;
}

export const NOTHING_ALLOWED: ProbeAllowance = { ranges: [], hosts: new Set() };

/**
 * `PROBE_ALLOW`'s value: CIDRs and host names separated by commas or white space. Throws naming what is neither.
 */
export function parseProbeAllowance(value: string): ProbeAllowance {
  const ranges: Range[] = [];
  const hosts = new Set<string>();
  for (const item of value.split(/[\s,]+/).filter(Boolean)) {
    const range = parseRange(item);
    if (range !== undefined) ranges.push(range);
    else if (/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?$/i.test(item))
      hosts.add(item.toLowerCase().replace(/\.$/, ""));
    else throw new Error(`PROBE_ALLOW: "${item}" is neither a CIDR range nor a host name.`);
  }
  return { ranges, hosts };
}

/**
 * Why the prober may not connect to `address` (an IP address as resolved) for `host` (the URL's host name), or
 * undefined when it may. A host name `PROBE_ALLOW` names may be reached at whatever it resolves to; otherwise an
 * address in an allowed range may be, and any other that is not in a refused range.
 */
export function refusalOf(address: string, host: string, allowance: ProbeAllowance): string | undefined {
  const parsed = addressBits(address);
  if (parsed === undefined) return `${address} is not an IP address`;
  if (allowance.hosts.has(host.toLowerCase().replace(/\.$/, ""))) return undefined;
  if (allowance.ranges.some((range) => inRange(range, parsed.family, parsed.bits))) return undefined;
  const carried = parsed.family === 6 ? carriedIpv4(parsed.bits) : undefined;
  if (carried !== undefined) {
    if (allowance.ranges.some((range) => inRange(range, 4, carried))) return undefined;
    const inner = refused.find((range) => inRange(range, 4, carried));
    if (inner !== undefined) return `${address} carries a ${inner.what} IPv4 address`;
  }
  const range = refused.find((r) => inRange(r, parsed.family, parsed.bits));
  return range === undefined ? undefined : `${address} is a ${range.what} address`;
}
