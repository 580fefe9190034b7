package delivery

import (
	"fmt"
	"net/netip"
	"syscall"
)

// AddressError is a connection the deliverer refused to make: the address
// it was about to dial is not a public one. The delivery fails at once (a
// retry would dial the same kind of address), with this as its last_error.
type AddressError struct {
	Addr   netip.Addr
	Reason string // "loopback", "private", …
}

func (e *AddressError) Error() string {
	return fmt.Sprintf("refused to connect to %s: a %s address, not a public one (MERCHANT_WEBHOOK_ALLOW_PRIVATE=true allows it, for development)", e.Addr, e.Reason)
}

// nonPublic are the ranges checkAddress refuses beyond what netip
// classifies itself (loopback, private, link-local, multicast,
// unspecified): the IANA special-purpose ranges that are not reachable
// destinations on the internet, so that no delivery reaches the service's own
// network or a neighbour's through them.
var nonPublic = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // 255.255.255.255 included
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignment"}, // Teredo included
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// Prefixes whose addresses carry an IPv4 address in their last 32 bits
// (NAT64) or in bits 16 to 48 (6to4): judged by that address.
var (
	nat64  = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// checkAddress returns an *AddressError for an address that is not public.
// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as its IPv4 address.
func checkAddress(a netip.Addr) error {
	a = a.Unmap()
	if reason := nonPublicReason(a); reason != "" {
		return &AddressError{Addr: a, Reason: reason}
	}
	return nil
}

func nonPublicReason(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate(): // 10/8, 172.16/12, 192.168/16, fc00::/7
		return "private"
	case a.IsLinkLocalUnicast(): // 169.254/16, fe80::/10
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	if embedded, ok := embeddedIPv4(a); ok {
		if reason := nonPublicReason(embedded); reason != "" {
			return reason + " (embedded in " + a.String() + ")"
		}
	}
	return ""
}

// embeddedIPv4 is the IPv4 address a NAT64 or 6to4 address stands for.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	for _, p := range nat64 {
		if p.Contains(a) {
			return netip.AddrFrom4([4]byte(b[12:16])), true
		}
	}
	if sixTo4.Contains(a) {
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// refuseNonPublic is a net.Dialer Control hook: it runs on the address the
// dialer is about to connect to, after name resolution, so a name that
// resolves (or is rebound) to a non-public address is refused as surely as
// the address written in a URL.
func refuseNonPublic(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &AddressError{Reason: "unparsable (" + address + ")"}
	}
	return checkAddress(ap.Addr())
}
