// Package netpolicy is the address policy of the tools that reach the
// network for a model (web_fetch, and every request a browser page
// makes), and of the webhook deliveries hrns serve makes to addresses its
// callers give: only the public internet.
//
//	d := &net.Dialer{Control: netpolicy.Control(nil)}
//	// d refuses to connect to 127.0.0.1, 10.0.0.1, [::ffff:127.0.0.1],
//	// [64:ff9b::a00:1], [2002:7f00:1::] ... with a *netpolicy.BlockedError.
//
// The check belongs at connect time, on the address actually dialled
// (after DNS resolution, for every redirect): [Control] is a
// [net.Dialer] Control function that does it. [Reason] is the policy
// itself, [CheckHost] the check of a URL's host before any lookup.
//
// # What is refused
//
// Loopback, unspecified, private, link-local, multicast, cloud metadata,
// shared (carrier-grade NAT), benchmarking, reserved, broadcast and
// documentation addresses, IPv4 and IPv6. An IPv6 address that embeds an
// IPv4 one is judged by the IPv4 address too, in every form: IPv4-mapped
// (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), IPv4-translated
// (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96), 6to4 (2002::/16), Teredo
// (2001::/32, server and client) and ISATAP interface identifiers. The
// local-use NAT64 prefix 64:ff9b:1::/48 (which may embed an IPv4 address
// at any of several positions) is refused whole, as are the deprecated
// IPv4-compatible addresses.
package netpolicy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// A BlockedError is the refusal to connect to an address that is not on
// the public internet.
type BlockedError struct {
	// Addr is the address refused (IPv4-mapped addresses unmapped).
	Addr netip.Addr
	// Reason says why, as [Reason] does.
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("connection to %v refused: %s; only public internet addresses are allowed", e.Addr, e.Reason)
}

// Refusal is the text of a refused connection for whoever must not learn
// where a name leads: an API key of hrns serve (a tenant), or the model
// working for one. [BlockedError.Error] names the address a name
// resolved to, which would let them ask what the deployment's internal
// names resolve to (a DNS oracle); this says only that the destination is
// not on the public internet. The operator's log keeps the full error.
const Refusal = "refused: the destination's address is not on the public internet (loopback, private, link-local or otherwise reserved); only public internet addresses are allowed"

// Describe says why a connection failed without the address dialled,
// for whoever must not learn where a name leads (see [Refusal]): the
// policy's refusal, a name that does not resolve, a TLS handshake or
// certificate that failed ([DescribeTLS]), a connection refused, reset or
// without route. ok is false when err is none of these (nor a dial's
// *net.OpError), and the caller words it.
func Describe(err error) (text string, ok bool) {
	if _, isBlocked := errors.AsType[*BlockedError](err); isBlocked {
		return Refusal, true
	}
	if dns, isDNS := errors.AsType[*net.DNSError](err); isDNS {
		if dns.IsNotFound {
			return "the name does not resolve", true
		}
		return "looking up the name failed", true
	}
	if text, ok := DescribeTLS(err); ok {
		return text, true
	}
	if _, isOp := errors.AsType[*net.OpError](err); !isOp {
		return "", false
	}
	// "dial tcp 10.0.0.5:443: connect: connection refused": the address
	// stays out.
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "could not connect: connection refused", true
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset", true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "could not connect: no route to the host", true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "the connection timed out", true
	}
	return "could not connect", true
}

// The words of [DescribeTLS].
const (
	TLSWrongName = "the server's certificate was not valid for this name"
	TLSUntrusted = "the server's certificate was not trusted"
	TLSInvalid   = "the server's certificate was not valid"
	TLSHandshake = "the TLS handshake with the server failed"
)

// DescribeTLS says how a TLS handshake or certificate check failed, in
// fixed words, for whoever must not learn what the server's certificate
// holds: an x509 error names the certificate's hosts and addresses ("x509:
// certificate is valid for db.corp.internal, 10.0.0.5, not ..."), which,
// for a destination the operator allowed, are the deployment's. ok is
// false when err is no TLS failure. The operator's log keeps the full
// error.
func DescribeTLS(err error) (text string, ok bool) {
	var (
		hn   x509.HostnameError
		ua   x509.UnknownAuthorityError
		ci   x509.CertificateInvalidError
		cver *tls.CertificateVerificationError
		rec  tls.RecordHeaderError
		alt  tls.AlertError
	)
	switch {
	case errors.As(err, &hn):
		return TLSWrongName, true
	case errors.As(err, &ua):
		return TLSUntrusted, true
	case errors.As(err, &ci), errors.As(err, &cver):
		return TLSInvalid, true
	}
	msg := err.Error()
	if strings.Contains(msg, "x509: ") {
		// A chain whose wrapping dropped the types (%v): the x509 text.
		switch {
		case strings.Contains(msg, "certificate is valid for"), strings.Contains(msg, "certificate is not valid for any names"):
			return TLSWrongName, true
		case strings.Contains(msg, "certificate signed by unknown authority"):
			return TLSUntrusted, true
		}
		return TLSInvalid, true
	}
	if errors.As(err, &rec) || errors.As(err, &alt) || strings.Contains(msg, "tls: ") {
		return TLSHandshake, true
	}
	return "", false
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
// documentation ranges; for IPv6, the discard-only, benchmarking,
// documentation and SRv6 SID ranges.
var nonPublicPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:2::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("3fff::/20"),
	netip.MustParsePrefix("5f00::/16"),
}

// The IPv6 prefixes whose addresses carry an IPv4 address.
var (
	compatible  = netip.MustParsePrefix("::/96")           // ::a.b.c.d, deprecated (RFC 4291)
	translated  = netip.MustParsePrefix("::ffff:0:0:0/96") // ::ffff:0:a.b.c.d (RFC 2765)
	nat64       = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215
	sixToFour   = netip.MustParsePrefix("2002::/16")       // RFC 3056
	teredo      = netip.MustParsePrefix("2001::/32")       // RFC 4380
	isatapIID   = [4]byte{0x00, 0x00, 0x5e, 0xfe}
	isatapIIDGl = [4]byte{0x02, 0x00, 0x5e, 0xfe}
)

// metadataReason is Reason's answer for a cloud metadata address; inside
// an IPv6 form it is followed by the form.
const metadataReason = "a cloud metadata address"

// IsMetadata reports whether a is a cloud metadata address, written as
// itself or carried inside an IPv6 address (IPv4-mapped, NAT64, 6to4,
// Teredo...): what an operator who opens the private addresses must still
// not open by accident.
func IsMetadata(a netip.Addr) bool {
	return strings.HasPrefix(Reason(a), metadataReason)
}

// Reason says why a is not a public internet address, or "" if it is.
func Reason(a netip.Addr) string {
	a = a.Unmap() // ::ffff:a.b.c.d is a.b.c.d
	if a.Is6() {
		if r := embeddedReason(a); r != "" {
			return r
		}
	}
	switch {
	case metadataAddrs[a]:
		return metadataReason
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
	case !a.IsValid():
		return "not an address"
	}
	for _, p := range nonPublicPrefixes {
		if p.Contains(a) {
			return "a reserved address"
		}
	}
	return ""
}

// embeddedReason judges the IPv4 addresses IPv6 address a carries, and
// refuses the forms that are never public.
func embeddedReason(a netip.Addr) string {
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte(b[i : i+4])) }
	inner := func(e netip.Addr, form string) string {
		if r := Reason(e); r != "" {
			return r + " (inside " + form + ")"
		}
		return ""
	}
	switch {
	case a == netip.IPv6Unspecified() || a == netip.IPv6Loopback():
		return "" // judged as themselves
	case compatible.Contains(a):
		if r := inner(v4(12), "an IPv4-compatible address"); r != "" {
			return r
		}
		return "a deprecated IPv4-compatible address"
	case translated.Contains(a):
		return inner(v4(12), "an IPv4-translated address")
	case nat64.Contains(a):
		return inner(v4(12), "a NAT64 address")
	case nat64Local.Contains(a):
		return "a local-use NAT64 address"
	case sixToFour.Contains(a):
		if r := inner(v4(2), "a 6to4 address"); r != "" {
			return r
		}
	case teredo.Contains(a):
		if r := inner(v4(4), "a Teredo address (its server)"); r != "" {
			return r
		}
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		if r := inner(netip.AddrFrom4(client), "a Teredo address (its client)"); r != "" {
			return r
		}
	}
	if iid := [4]byte(b[8:12]); iid == isatapIID || iid == isatapIIDGl {
		if r := inner(v4(12), "an ISATAP address"); r != "" {
			return r
		}
	}
	return ""
}

// Control is a [net.Dialer] Control function that refuses, with a
// *[BlockedError], every address [Reason] refuses, unless exempt (which
// may be nil) lets it through. It runs for every connection, after DNS
// resolution, so neither a redirect nor a DNS answer that changes between
// lookups escapes it.
func Control(exempt func(netip.AddrPort) bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("netpolicy: unexpected dial address %q", address)
		}
		if exempt != nil && exempt(ap) {
			return nil
		}
		if r := Reason(ap.Addr()); r != "" {
			return &BlockedError{Addr: ap.Addr().Unmap(), Reason: r}
		}
		return nil
	}
}

// IsOwnAddress reports whether a is an address of one of this machine's
// network interfaces (a public one included): a proxy that must keep its
// clients off this machine's services (a server listening on all
// addresses, a database) refuses these too. The interfaces are read at
// each call, so an address added since counts.
func IsOwnAddress(a netip.Addr) bool {
	a = a.Unmap()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: refused
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(n.IP); ok && b.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// CheckHost refuses a URL host that is a number some resolvers read as an
// IPv4 address (0x7f000001, 2130706433, 0177.0.0.1, 127.1): the Go
// resolver would look it up as a name, other software would not, and
// either way it is no way to name a public site. All other hosts, IP
// literals included, are left to the check at connect time.
func CheckHost(host string) error {
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return nil
	}
	if a, ok := ParseLooseIPv4(host); ok {
		return fmt.Errorf("refused host %q: an IPv4 address in a non-standard notation (%v); write addresses as four decimal numbers", host, a)
	}
	return nil
}

// ParseLooseIPv4 parses the forms of IPv4 address that inet_aton accepts
// beyond the dotted quad: one to four parts, each decimal, octal (leading
// 0) or hexadecimal (leading 0x), the last one filling the remaining bytes.
func ParseLooseIPv4(s string) (netip.Addr, bool) {
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

// ParseAllowList reads an operator's allow-list of addresses let through
// the policy (the browser's --browser-allow, web_fetch's --web-allow): a
// comma-separated list of addresses (10.0.0.5), address prefixes
// (10.0.0.0/8) and address:port pairs (127.0.0.1:8080, [::1]:8080). An
// empty list gives nil (nothing allowed beyond the policy). The function
// it returns is an exempt function for [Control].
func ParseAllowList(s string) (func(netip.AddrPort) bool, error) {
	var (
		prefixes []netip.Prefix
		ports    = map[netip.AddrPort]bool{}
	)
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			prefixes = append(prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil {
			prefixes = append(prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if ap, err := netip.ParseAddrPort(item); err == nil {
			ports[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
			continue
		}
		return nil, fmt.Errorf("%q in the allow-list is not an address, a prefix (10.0.0.0/8) or an address:port", item)
	}
	if len(prefixes) == 0 && len(ports) == 0 {
		return nil, nil
	}
	return func(ap netip.AddrPort) bool {
		a := ap.Addr().Unmap()
		if ports[netip.AddrPortFrom(a, ap.Port())] {
			return true
		}
		for _, p := range prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}, nil
}
