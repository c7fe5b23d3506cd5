package tools

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// A blockedAddrError is web_fetch's refusal to connect to an address that
// is not on the public internet.
type blockedAddrError struct {
	addr   netip.Addr
	reason string
}

func (e *blockedAddrError) Error() string {
	return fmt.Sprintf("web_fetch refuses to connect to %v: %s; only public internet addresses are allowed", e.addr, e.reason)
}

// Cloud metadata endpoints, refused by name in the message.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack...
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
}

// Ranges that are not the public internet beyond those the netip methods
// name: "this network", shared address space (carrier-grade NAT), IETF
// protocol assignments, benchmarking, reserved and broadcast, and the
// documentation ranges.
var nonPublicPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// nat64 is the well-known NAT64 prefix, whose addresses embed an IPv4 one.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// blockReason says why a is not a public internet address, or "" if it is.
func blockReason(a netip.Addr) string {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		if r := blockReason(netip.AddrFrom4([4]byte(b[12:]))); r != "" {
			return r + " (inside a NAT64 address)"
		}
	}
	switch {
	case metadataAddrs[a]:
		return "a cloud metadata address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	for _, p := range nonPublicPrefixes {
		if p.Contains(a) {
			return "a reserved address"
		}
	}
	return ""
}

// dialControl is the net.Dialer Control function of web_fetch: it runs for
// every connection, after DNS resolution and for every redirect, and
// refuses addresses that are not public unless exempt says otherwise.
func dialControl(exempt func(netip.AddrPort) bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("web_fetch: unexpected dial address %q", address)
		}
		if exempt != nil && exempt(ap) {
			return nil
		}
		if r := blockReason(ap.Addr()); r != "" {
			return &blockedAddrError{addr: ap.Addr().Unmap(), reason: r}
		}
		return nil
	}
}

// checkHost refuses a URL host that is a number some resolvers read as an
// IPv4 address (0x7f000001, 2130706433, 0177.0.0.1, 127.1): the Go resolver
// would look it up as a name, other software would not, and either way it
// is no way to name a public site. All other hosts, IP literals included,
// are checked at connect time by dialControl.
func checkHost(host string) error {
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return nil
	}
	if a, ok := parseLooseIPv4(host); ok {
		return fmt.Errorf("web_fetch refuses host %q: an IPv4 address in a non-standard notation (%v); write addresses as four decimal numbers", host, a)
	}
	return nil
}

// parseLooseIPv4 parses the forms of IPv4 address that inet_aton accepts
// beyond the dotted quad: one to four parts, each decimal, octal (leading
// 0) or hexadecimal (leading 0x), the last one filling the remaining bytes.
func parseLooseIPv4(s string) (netip.Addr, bool) {
	if s == "" || strings.HasSuffix(s, ".") {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	if vals[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// dialer returns the dialer of web_fetch.
func newDialer(allowPrivate bool, exempt func(netip.AddrPort) bool) *net.Dialer {
	d := &net.Dialer{}
	if !allowPrivate {
		d.Control = dialControl(exempt)
	}
	return d
}
