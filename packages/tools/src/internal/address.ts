/**
 * Which addresses `web_fetch` refuses, and the DNS lookup that refuses them at connection time.
 *
 * Refused: every range of the IANA special-purpose registries that is not the public internet
 * (loopback, private, link-local — where cloud metadata services such as 169.254.169.254 and
 * fd00:ec2::254 answer —, carrier-grade NAT, unspecified, multicast, documentation, benchmarking,
 * reserved), and the IPv6 forms that embed an IPv4 address or tunnel to one (IPv4-compatible,
 * NAT64, 6to4, Teredo). Node's `net.BlockList` checks an IPv4-mapped IPv6 address
 * (`::ffff:127.0.0.1`) against the IPv4 rules.
 *
 * The check runs on the addresses a name resolves to, inside the `lookup` the connection itself
 * uses: the socket connects to an address that was checked, so a name that resolves to a public
 * address once and to a private one the next time (DNS rebinding) gains nothing.
 */
import * as NodeDns from "node:dns"
import * as NodeNet from "node:net"

const ranges: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["loopback", ["127.0.0.0/8", "::1/128"]],
  ["unspecified", ["0.0.0.0/8", "::/128"]],
  ["private", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10"]],
  ["link-local (where cloud metadata services answer)", ["169.254.0.0/16", "fe80::/10"]],
  ["carrier-grade NAT", ["100.64.0.0/10"]],
  ["multicast", ["224.0.0.0/4", "ff00::/8"]],
  // IPv4-mapped addresses (::ffff:a.b.c.d) are not listed: BlockList checks them against the IPv4
  // rules (and a rule ::ffff:0:0/96 would match every IPv4 address)
  ["an IPv6 form of an IPv4 address", ["::/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16"]],
  [
    "reserved or special-purpose",
    [
      "192.0.0.0/24",
      "192.0.2.0/24",
      "192.88.99.0/24",
      "198.18.0.0/15",
      "198.51.100.0/24",
      "203.0.113.0/24",
      "240.0.0.0/4",
      "100::/64",
      "2001::/23",
      "2001:db8::/32",
      "3fff::/20",
      "5f00::/16"
    ]
  ]
]

const lists = ranges.map(([name, subnets]) => {
  const list = new NodeNet.BlockList()
  for (const subnet of subnets) {
    const [network, prefix] = subnet.split("/") as [string, string]
    list.addSubnet(network, Number(prefix), NodeNet.isIPv6(network) ? "ipv6" : "ipv4")
  }
  return [name, list] as const
})

/** Why `address` (an IP address) is refused, or `undefined` when it is a public one. */
export const refusedRange = (address: string): string | undefined => {
  const bare = address.replace(/%.*$/, "") // an IPv6 zone ("fe80::1%eth0")
  const family = NodeNet.isIP(bare)
  if (family === 0) return "not an IP address"
  for (const [name, list] of lists) if (list.check(bare, family === 6 ? "ipv6" : "ipv4")) return name
  return undefined
}

/** The error a refused address fails a connection with; its message is meant for the model. */
export class AddressRefused extends Error {
  override readonly name = "AddressRefused"
}

/** A host as compared with the allow-list: lower case, without a final dot, IPv6 without brackets. */
export const hostKey = (hostname: string): string =>
  hostname.toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/(?<=.)\.$/, "")

const refusal = (host: string, address: string, range: string): AddressRefused =>
  new AddressRefused(
    `${host === address ? host : `${host} resolves to ${address}, which`} is a ${range} address; web_fetch ` +
      "refuses addresses that are not public (a program can allow a host by name with allowHosts)"
  )

/** Why a URL's host, when it is an IP address, is refused (names are checked when they resolve). */
export const refusedLiteral = (hostname: string, allowed: ReadonlySet<string>): AddressRefused | undefined => {
  const host = hostKey(hostname)
  if (allowed.has(host) || NodeNet.isIP(host) === 0) return undefined
  const range = refusedRange(host)
  return range === undefined ? undefined : refusal(host, host, range)
}

type LookupAll = (
  hostname: string,
  options: NodeDns.LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: Array<NodeDns.LookupAddress>) => void
) => void

/**
 * A `lookup` for `net.connect` that resolves with `resolve` (default `dns.lookup`) and fails with
 * `AddressRefused` when any address of a host that is not allowed by name is refused.
 */
export const guardedLookup = (
  allowed: ReadonlySet<string>,
  resolve: LookupAll = NodeDns.lookup
) =>
(
  hostname: string,
  options: NodeDns.LookupOptions,
  callback: (
    error: NodeJS.ErrnoException | null,
    address: string | Array<NodeDns.LookupAddress>,
    family?: number
  ) => void
): void => {
  resolve(hostname, { ...options, all: true }, (error, addresses) => {
    if (error !== null) return callback(error, [])
    if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`)), [])
    if (!allowed.has(hostKey(hostname))) {
      for (const { address } of addresses) {
        const range = refusedRange(address)
        if (range !== undefined) return callback(refusal(hostKey(hostname), address, range), [])
      }
    }
    if (options.all === true) return callback(null, addresses)
    return callback(null, addresses[0]!.address, addresses[0]!.family)
  })
}
