package safehttp

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrForbiddenAddress is the error, wrapped, of every refusal to connect to
// a destination that is not a public unicast address. Test for it with
// errors.Is.
var ErrForbiddenAddress = errors.New("destination address not allowed")

// AddressError reports an address that CheckAddr refused. It wraps
// ErrForbiddenAddress. Its text names the address and why it is refused and
// is safe to show a client.
type AddressError struct {
	Addr   netip.Addr
	Reason string // e.g. "loopback", "private", "link-local"
}

// Error implements error.
func (e *AddressError) Error() string {
	return fmt.Sprintf("%s is a %s address", e.Addr, e.Reason)
}

// Unwrap returns ErrForbiddenAddress.
func (e *AddressError) Unwrap() error { return ErrForbiddenAddress }

// A deny-listed IPv4 block and why it is refused.
type block struct {
	prefix netip.Prefix
	reason string
}

// ipv4Blocks lists the IPv4 ranges that are not publicly routable unicast
// destinations (IANA special-purpose address registry), cloud metadata
// addresses included: 169.254.169.254 (AWS, GCP, Azure) lies in the
// link-local block and 192.0.0.192 (Oracle) in the IETF protocol block.
func ipv4Blocks() []block {
	return []block{
		{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (\"this network\")"},
		{netip.MustParsePrefix("10.0.0.0/8"), "private"},
		{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
		{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
		{netip.MustParsePrefix("172.16.0.0/12"), "private"},
		{netip.MustParsePrefix("192.0.0.0/24"), "reserved (IETF protocol assignments)"},
		{netip.MustParsePrefix("192.0.2.0/24"), "reserved (documentation)"},
		{netip.MustParsePrefix("192.168.0.0/16"), "private"},
		{netip.MustParsePrefix("198.18.0.0/15"), "reserved (benchmarking)"},
		{netip.MustParsePrefix("198.51.100.0/24"), "reserved (documentation)"},
		{netip.MustParsePrefix("203.0.113.0/24"), "reserved (documentation)"},
		{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255
	}
}

// ipv6Blocks lists the IPv6 ranges refused outright. Ranges that embed an
// IPv4 address (IPv4-mapped, NAT64, 6to4) are not here: CheckAddr judges
// them by the IPv4 address they carry.
func ipv6Blocks() []block {
	return []block{
		{netip.MustParsePrefix("::/128"), "unspecified"},
		{netip.MustParsePrefix("::1/128"), "loopback"},
		{netip.MustParsePrefix("::/96"), "reserved (IPv4-compatible)"},
		{netip.MustParsePrefix("64:ff9b:1::/48"), "reserved (local-use NAT64)"},
		{netip.MustParsePrefix("100::/64"), "reserved (discard-only)"},
		{netip.MustParsePrefix("2001::/32"), "reserved (Teredo)"},
		{netip.MustParsePrefix("2001:db8::/32"), "reserved (documentation)"},
		{netip.MustParsePrefix("fc00::/7"), "private"}, // unique local, incl. AWS fd00:ec2::254
		{netip.MustParsePrefix("fe80::/10"), "link-local"},
		{netip.MustParsePrefix("fec0::/10"), "reserved (site-local)"},
		{netip.MustParsePrefix("ff00::/8"), "multicast"},
	}
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	// globalUnicast6 is the only IPv6 range IANA allocates for global
	// unicast; anything else is refused.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// CheckAddr reports whether ip is a public unicast address that an outbound
// request may reach. It returns nil for such an address and an
// *AddressError (wrapping ErrForbiddenAddress) for loopback, private
// (RFC 1918, fc00::/7), link-local (169.254.0.0/16, including the cloud
// metadata address, and fe80::/10), unspecified, multicast, shared CGNAT
// (100.64.0.0/10), reserved and documentation ranges, and for IPv6 forms
// that embed such an IPv4 address (IPv4-mapped ::ffff:a.b.c.d, NAT64
// 64:ff9b::/96, 6to4 2002::/16). IPv6 addresses outside 2000::/3, the
// global unicast space, are refused as reserved. An invalid (zero) ip is
// refused too.
func CheckAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return &AddressError{Addr: ip, Reason: "invalid"}
	}
	ip = ip.WithZone("")
	if ip.Is4In6() {
		return checkV4(ip, ip.Unmap())
	}
	if ip.Is4() {
		return checkV4(ip, ip)
	}
	if nat64Prefix.Contains(ip) {
		b := ip.As16()
		return checkV4(ip, netip.AddrFrom4([4]byte(b[12:16])))
	}
	if sixToFour.Contains(ip) {
		b := ip.As16()
		return checkV4(ip, netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, b := range ipv6Blocks() {
		if b.prefix.Contains(ip) {
			return &AddressError{Addr: ip, Reason: b.reason}
		}
	}
	if !globalUnicast6.Contains(ip) {
		return &AddressError{Addr: ip, Reason: "reserved (outside 2000::/3 global unicast)"}
	}
	return nil
}

// checkV4 judges the IPv4 address v4, reporting orig (the address as it
// was dialed) when it is refused.
func checkV4(orig, v4 netip.Addr) error {
	for _, b := range ipv4Blocks() {
		if b.prefix.Contains(v4) {
			return &AddressError{Addr: orig, Reason: b.reason}
		}
	}
	return nil
}
