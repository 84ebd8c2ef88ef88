import { describe, expect, it } from "vitest";
import {
  addressBits,
  NOTHING_ALLOWED,
  parseProbeAllowance,
  parseRange,
  refusalOf,
} from "../../src/probe/address-guard.js";

const refused = (address: string, host = "agent.example") => refusalOf(address, host, NOTHING_ALLOWED);

describe("the prober's address guard", () => {
  it.each([
    ["0.0.0.0", "this network"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "shared (CGNAT)"],
    ["100.100.100.200", "shared (CGNAT)"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["169.254.169.254", "link-local (cloud metadata)"],
    ["168.63.129.16", "cloud metadata (Azure)"],
    ["192.0.0.8", "IETF protocol assignments"],
    ["192.0.2.10", "documentation"],
    ["198.18.5.5", "benchmarking"],
    ["224.0.0.251", "multicast"],
    ["255.255.255.255", "reserved"],
  ])("refuses IPv4 %s (%s)", (address, what) => {
    expect(refused(address)).toBe(`${address} is a ${what} address`);
  });

  it.each([
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["fc00::1", "unique-local"],
    ["fd00:ec2::254", "unique-local"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["FEBF::1", "link-local"],
    ["fec0::1", "site-local"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "documentation"],
    ["100::1", "discard"],
  ])("refuses IPv6 %s (%s)", (address, what) => {
    expect(refused(address)).toBe(`${address} is a ${what} address`);
  });

  it.each([
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:169.254.169.254", "link-local (cloud metadata)"],
    ["::ffff:10.0.0.1", "private"],
    ["::127.0.0.1", "loopback"],
    ["64:ff9b::a9fe:a9fe", "link-local (cloud metadata)"],
    ["64:ff9b:1::c0a8:1", "private"],
    ["2002:7f00:1::1", "loopback"],
    ["2002:c0a8:0101::", "private"],
  ])("refuses %s, which carries a %s IPv4 address", (address, what) => {
    expect(refused(address)).toBe(`${address} carries a ${what} IPv4 address`);
  });

  it.each([
    "93.184.215.14",
    "8.8.8.8",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700::1111",
    "::ffff:8.8.8.8",
    "2002:0808:0808::1",
  ])("lets public %s through", (address) => {
    expect(refused(address)).toBeUndefined();
  });

  it("refuses what is not an IP address", () => {
    expect(refused("agent.example")).toBe("agent.example is not an IP address");
    expect(refused("127.0.0.256")).toBe("127.0.0.256 is not an IP address");
  });

  it("opens the ranges PROBE_ALLOW names, and only those", () => {
    const allowance = parseProbeAllowance("127.0.0.2/32");
    expect(refusalOf("127.0.0.2", "127.0.0.2", allowance)).toBeUndefined();
    expect(refusalOf("::ffff:127.0.0.2", "h", allowance)).toBeUndefined();
    expect(refusalOf("127.0.0.3", "127.0.0.3", allowance)).toBe("127.0.0.3 is a loopback address");
    const wide = parseProbeAllowance("127.0.0.0/8, fd00::/8");
    expect(refusalOf("127.9.9.9", "h", wide)).toBeUndefined();
    expect(refusalOf("fd12::1", "h", wide)).toBeUndefined();
    expect(refusalOf("fc00::1", "h", wide)).toBe("fc00::1 is a unique-local address");
    expect(refusalOf("10.0.0.1", "h", wide)).toBe("10.0.0.1 is a private address");
  });

  it("opens a host name PROBE_ALLOW names at whatever it resolves to, its trailing dot and case aside", () => {
    const allowance = parseProbeAllowance("agents.internal 10.9.0.0/16");
    expect(refusalOf("10.1.1.1", "Agents.Internal.", allowance)).toBeUndefined();
    expect(refusalOf("10.1.1.1", "other.internal", allowance)).toBe("10.1.1.1 is a private address");
    expect(refusalOf("10.9.3.4", "other.internal", allowance)).toBeUndefined();
  });

  it("refuses a PROBE_ALLOW item that is neither a range nor a host name, naming it", () => {
    expect(() => parseProbeAllowance("10.0.0.0/33")).toThrow('PROBE_ALLOW: "10.0.0.0/33" is neither');
    expect(() => parseProbeAllowance("http://x")).toThrow('"http://x"');
    expect(() => parseProbeAllowance("::1/129")).toThrow('"::1/129"');
  });

  it("reads IPv6 forms to the same bits", () => {
    expect(addressBits("::ffff:127.0.0.1")).toEqual(addressBits("::ffff:7f00:1"));
    expect(addressBits("2001:db8::")).toEqual(addressBits("2001:0db8:0000:0000:0000:0000:0000:0000"));
    expect(addressBits("1::")?.bits).toBe(1n << 112n);
    expect(parseRange("10.0.0.1")).toMatchObject({ family: 4, prefix: 32 });
  });
});
